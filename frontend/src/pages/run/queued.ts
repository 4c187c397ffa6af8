/** How the run page's banner tells where a QUEUED run stands in the scheduler's queue. Pure. */
import type { RunDetail } from "../../api/types";
import { ordinal } from "../queue/format";

const QUEUED_PREFIX = "queued:";

export interface QueuedParts {
  /** What it waits for: the queue's reason, or the note without its "queued:" prefix. */
  reason: string;
  /** "1st in its team's queue", "3rd in its team's queue"; "" before the first pass. */
  place: string;
  /** The first runs ahead of it (ids), and how many more are ahead beyond them. */
  ahead: number[];
  more: number;
}

/** Whether the run waits for the scheduler's admission (not for Ray, once dispatched). */
export function isQueuedForAdmission(run: Pick<RunDetail, "status" | "waiting_for" | "queue">): boolean {
  if (run.status !== "QUEUED") return false;
  return Boolean(run.queue?.reason) || run.waiting_for.toLowerCase().startsWith(QUEUED_PREFIX);
}

export function queuedParts(run: Pick<RunDetail, "waiting_for" | "queue">): QueuedParts {
  const queue = run.queue ?? {};
  let reason = queue.reason ?? "";
  if (!reason) {
    const note = run.waiting_for;
    reason = note.toLowerCase().startsWith(QUEUED_PREFIX) ? note.slice(QUEUED_PREFIX.length).trim() : note;
  }
  const ahead = queue.ahead ?? [];
  const count = typeof queue.ahead_count === "number" ? queue.ahead_count : ahead.length;
  const place = typeof queue.position === "number" ? `${ordinal(queue.position)} in its team's queue` : "";
  return { reason, place, ahead, more: Math.max(0, count - ahead.length) };
}
