/** Which running runs a compare page follows live, and how their feeds are doing, in words. */
import type { SocketState } from "../../api/liveSocket";
import { isTerminal } from "../../api/types";

/** Sockets one compare page keeps open at most: one per running run. */
export const MAX_LIVE_FEEDS = 20;
/** A tab hidden this long may have missed messages (timers and sockets sleep): ask again. */
export const SLEEP_RESYNC_MS = 15_000;

export interface LiveRun {
  id: number;
  status: string;
}

/** The runs that get a live feed: those still running, the first MAX_LIVE_FEEDS of them. */
export function liveRuns(runs: readonly LiveRun[]): { fed: number[]; running: number } {
  const running = runs.filter((run) => !isTerminal(run.status)).map((run) => run.id);
  return { fed: running.slice(0, MAX_LIVE_FEEDS), running: running.length };
}

/** "live: 3 running runs", "1 of 3 feeds reconnecting…": the feeds' state in a few words. */
export function describeFeeds(states: readonly SocketState[], running: number): { text: string; tone: SocketState } {
  const fed = states.length;
  const count = (state: SocketState) => states.filter((s) => s === state).length;
  const [up, closed, refused, connecting] = [count("up"), count("closed"), count("refused"), count("connecting")];
  const capped = running > fed ? ` (the first ${fed} of ${running} running runs)` : "";
  if (closed > 0) return { text: `${closed} of ${fed} live feeds reconnecting…${capped}`, tone: "closed" };
  if (connecting > 0) return { text: `connecting ${connecting} of ${fed} live feeds…${capped}`, tone: "connecting" };
  if (up === 0) return { text: "no live feed", tone: "refused" };
  const without = refused > 0 ? `, ${refused} without a feed` : "";
  return { text: `live: ${up} running run${up === 1 ? "" : "s"}${without}${capped}`, tone: "up" };
}
