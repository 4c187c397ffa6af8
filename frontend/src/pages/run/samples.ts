import type { QueryClient } from "@tanstack/react-query";

import { queryKeys } from "../../api/queryKeys";

/**
 * The samples panel refetches at most this often. A job posts samples every step (about a
 * second on CPU, often twice close together), and refetching on every `samples.added` made the
 * page fetch samples about once a second and abort the fetch in flight whenever the next event
 * came first.
 */
export const SAMPLES_REFRESH_MS = 5000;
// Another look, shortly, when the refresh falls while a fetch is in flight (that fetch may have
// started before the newest samples were stored).
const RETRY_WHILE_FETCHING_MS = 500;

interface Refresh {
  last: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

const refreshes = new WeakMap<QueryClient, Map<number, Refresh>>();

/**
 * New samples were stored: refetch the run's newest samples now, or once at the end of the
 * current SAMPLES_REFRESH_MS window when the panel refreshed less than that ago. Never aborts a
 * fetch in flight; the last event of a burst is always followed by a fetch that starts after it.
 */
export function refreshSamplesSoon(queryClient: QueryClient, runId: number): void {
  let byRun = refreshes.get(queryClient);
  if (!byRun) {
    byRun = new Map();
    refreshes.set(queryClient, byRun);
  }
  const state = byRun.get(runId) ?? { last: Number.NEGATIVE_INFINITY, timer: undefined };
  byRun.set(runId, state);
  if (state.timer !== undefined) return; // a refresh is already due
  const key = queryKeys.samples(runId);
  const refresh = () => {
    state.timer = undefined;
    if (queryClient.isFetching({ queryKey: key, exact: true }) > 0) {
      state.timer = setTimeout(refresh, RETRY_WHILE_FETCHING_MS);
      return;
    }
    state.last = Date.now();
    void queryClient.invalidateQueries({ queryKey: key, exact: true }, { cancelRefetch: false });
  };
  const wait = state.last + SAMPLES_REFRESH_MS - Date.now();
  if (wait <= 0) refresh();
  else state.timer = setTimeout(refresh, wait);
}

/** One value of a checkpoint's `metrics` (a JSON object the job chose), or undefined. */
export function checkpointMetric(metrics: unknown, key: string): unknown {
  if (metrics === null || typeof metrics !== "object" || Array.isArray(metrics)) return undefined;
  return (metrics as Record<string, unknown>)[key];
}

/** Rewards as stored: numbers, "NaN"/"Infinity" strings for non-finite ones, or missing. */
export function formatReward(value: unknown): string {
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : value.toFixed(3);
  if (typeof value === "string") return value;
  return "–";
}
