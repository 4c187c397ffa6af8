/** Which running runs a compare page follows live, over one socket, and how it is doing, in words. */
import type { SocketState } from "../../api/liveSocket";
import { isTerminal, type WsMessage } from "../../api/types";
import { plural } from "../../format";

/** Runs one socket follows at most (the server's limit, controlplane.runs.consumers.MAX_LIVE_RUNS). */
export const MAX_LIVE_RUNS = 100;
/**
 * How often (ms) live points are applied, at most, for a feed of `runs` runs. Each application
 * realigns every run of the keys that got points and redraws their charts with every run's line,
 * so its cost grows with the runs shown: 200 ms up to 20 runs, then 10 ms a run, up to a second
 * at 100 (each run's own points still arrive within a second of being logged). At a batch a
 * second from each of 100 runs, 5 applications a second kept the page's main thread busy half
 * the time (benchmarks/compare_page.py).
 */
export function flushIntervalMs(runs: number): number {
  return Math.min(1000, Math.max(200, runs * 10));
}

/** A tab hidden this long may have missed messages (timers and sockets sleep): ask again. */
export const SLEEP_RESYNC_MS = 15_000;

export interface LiveRun {
  id: number;
  status: string;
}

/** The runs that get a live feed: those still running, the first MAX_LIVE_RUNS of them. */
export function liveRuns(runs: readonly LiveRun[]): { fed: number[]; running: number } {
  const running = runs.filter((run) => !isTerminal(run.status)).map((run) => run.id);
  return { fed: running.slice(0, MAX_LIVE_RUNS), running: running.length };
}

/** The socket of several runs' URL. */
export function runsSocketUrl(runIds: readonly number[], location: Pick<Location, "protocol" | "host">): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/ws/runs/?ids=${runIds.join(",")}`;
}

/** The run a message of a several-runs socket is about; null for a resync of every run. */
export function messageRun(message: WsMessage): number | null {
  switch (message.type) {
    case "run.snapshot":
    case "run.status":
      return message.run.id;
    case "resync":
      return message.run_id ?? null;
    default:
      return message.run_id;
  }
}

/** "live: 3 running runs", "reconnecting…": the feed's state in a few words. */
export function describeFeed(state: SocketState, fed: number, running: number): { text: string; tone: SocketState } {
  const capped = running > fed ? ` (the first ${fed} of ${running} running runs)` : "";
  switch (state) {
    case "up":
      return { text: `live: ${plural(fed, "running run")}${capped}`, tone: "up" };
    case "connecting":
      return { text: `connecting the live feed of ${plural(fed, "run")}…`, tone: "connecting" };
    case "closed":
      return { text: `live feed reconnecting…${capped}`, tone: "closed" };
    default:
      return { text: "no live feed", tone: "refused" };
  }
}
