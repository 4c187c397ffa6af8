/** How the queue reads: estimated starts as a wait with a range, resources, quotas. Pure. */
import { formatDateTime } from "../../format";

/** A queued run's estimated start as the API carries it (`queue.eta`). */
export interface Eta {
  start?: string;
  low?: string;
  high?: string;
  estimated_at?: string;
  unknown?: string;
}

/** A wait rounded for reading: "<1 min", "4 min", "1 h 20 min", "2 d 3 h". */
export function shortDuration(ms: number): string {
  const seconds = ms / 1000;
  if (!(seconds >= 60)) return "<1 min";
  let minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  let hours = Math.floor(minutes / 60);
  minutes -= hours * 60;
  if (hours < 24) return minutes ? `${hours} h ${minutes} min` : `${hours} h`;
  const days = Math.floor(hours / 24);
  hours -= days * 24;
  return hours ? `${days} d ${hours} h` : `${days} d`;
}

/** "3–6 min" when both ends are whole minutes, else "30 min–2 h"; one value when they read the same. */
export function durationRange(lowMs: number, highMs: number): string {
  const a = shortDuration(lowMs);
  const b = shortDuration(highMs);
  if (a === b) return a;
  const whole = /^(\d+) min$/;
  const ma = whole.exec(a);
  if (ma && whole.test(b)) return `${ma[1]}–${b}`;
  return `${a}–${b}`;
}

export interface EtaText {
  /** "in ~4 min (3–6 min)", "no estimate: <why>", "estimating…". */
  text: string;
  /** The absolute times, for a title (hover): "2026-12-04 14:05 (14:04–14:07), estimated 14:01". */
  title: string;
  kind: "estimate" | "unknown" | "pending";
}

function clock(iso: string): string {
  return formatDateTime(iso).slice(11);
}

/** A queued run's estimated start, relative to `now`, with its range; the absolute times for hover. */
export function formatEta(eta: Eta | null | undefined, now: number): EtaText {
  if (eta?.unknown) return { text: `no estimate: ${eta.unknown}`, title: eta.unknown, kind: "unknown" };
  const start = eta?.start ? Date.parse(eta.start) : Number.NaN;
  if (!eta?.start || Number.isNaN(start)) {
    return { text: "estimating…", title: "The scheduler has not estimated this run's start yet.", kind: "pending" };
  }
  const wait = start - now;
  let text = wait < 60_000 ? "in <1 min" : `in ~${shortDuration(wait)}`;
  let title = formatDateTime(eta.start);
  const low = eta.low ? Date.parse(eta.low) : Number.NaN;
  const high = eta.high ? Date.parse(eta.high) : Number.NaN;
  if (!Number.isNaN(low) && !Number.isNaN(high) && high > low) {
    text += ` (${durationRange(low - now, high - now)})`;
    title += ` (between ${clock(eta.low!)} and ${clock(eta.high!)})`;
  }
  if (eta.estimated_at) title += `; estimated at ${clock(eta.estimated_at)}`;
  return { text, title, kind: "estimate" };
}

type Amounts = Record<string, number | string> | null | undefined;

/**
 * Ray's own bookkeeping among a cluster's resources (bytes of memory, one "node:<ip>" per node,
 * accelerator types): not what runs reserve, and unreadable beside CPUs and GPUs.
 */
export function isSchedulable(name: string): boolean {
  return name !== "memory" && name !== "object_store_memory" && !name.startsWith("node:") && !name.startsWith("accelerator_type:");
}

/** {"CPU": 2, "GPU": 1} as "2 CPU, 1 GPU" (Ray's bookkeeping left out); nothing as "–". */
export function formatResources(resources: Amounts): string {
  if (!resources) return "–";
  const parts = Object.entries(resources)
    .filter(([name, v]) => isSchedulable(name) && typeof v === "number" && v > 0)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, v]) => `${formatAmount(v as number)} ${name}`);
  return parts.join(", ") || "–";
}

/** 1 → "1", 0.5 → "0.5", 2.25 → "2.25". */
export function formatAmount(value: number): string {
  return String(Math.round(value * 100) / 100);
}

/** A quota's limit: a number, or "no limit" (null). */
export function formatLimit(value: number | string | null | undefined): string {
  return typeof value === "number" ? formatAmount(value) : "no limit";
}

/** 0.0625 → "6%". */
export function formatShare(share: number | string | null | undefined): string {
  return typeof share === "number" ? `${Math.round(share * 100)}%` : "–";
}

/** "1st", "2nd", "3rd", "11th", "22nd". */
export function ordinal(n: number): string {
  const tens = n % 100;
  if (tens >= 11 && tens <= 13) return `${n}th`;
  return `${n}${{ 1: "st", 2: "nd", 3: "rd" }[n % 10] ?? "th"}`;
}

/** An admitted run's progress as a fraction (0..1), or null when its recipe counts no steps. */
export function progressOf(step: number | null | undefined, steps: number | null | undefined): number | null {
  if (typeof steps !== "number" || steps <= 0) return null;
  return Math.min(1, Math.max(0, (step ?? 0) / steps));
}

/** How long an admitted run waited: "12 s" under a minute, then as `shortDuration`; "–" for no number. */
export function formatWaited(seconds: number | string | null | undefined): string {
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 0) return "–";
  const whole = Math.round(seconds);
  return whole < 60 ? `${whole} s` : shortDuration(whole * 1000);
}

/**
 * What became of a preempted attempt: its outcome less the "preempted (<reason>); " the row
 * already says ("it stopped after step 12; resumes from its checkpoint of step 10"); before the
 * outcome, the step it reported stopping after; "stopping…" while it has not.
 */
export function preemptionOutcome(p: { reason: string; stopped_after_step: number | null; outcome: string }): string {
  if (p.outcome) {
    const repeated = `preempted (${p.reason}); `;
    return p.outcome.startsWith(repeated) ? p.outcome.slice(repeated.length) : p.outcome;
  }
  return p.stopped_after_step === null ? "stopping…" : `stopped after step ${p.stopped_after_step}`;
}
