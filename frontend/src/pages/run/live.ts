/**
 * Websocket messages of one run, applied to the TanStack Query cache. There is
 * no second store: the run detail, the runs lists, the metric keys and the
 * metric series are the same cache entries the REST hooks fill.
 */
import type { QueryClient } from "@tanstack/react-query";

import { MAX_POINTS } from "../../api/hooks";
import { groupPointsByKey, liveBufferFor, livePointsFromWire, mergeIntoAll, type LivePoint, type SeriesByKey } from "../../api/metrics";
import { queryKeys } from "../../api/queryKeys";
import type {
  MetricKeyInfo,
  MetricKeysResponse,
  RunDetail,
  RunPage,
  RunSummary,
  WsMessage,
} from "../../api/types";
import { refreshSamplesSoon } from "./samples";

/** `ws://host/ws/runs/12/` on http, `wss://` on https. */
export function runSocketUrl(runId: number, location: Pick<Location, "protocol" | "host">): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/ws/runs/${runId}/`;
}

/** Parse a frame; anything that is not a typed JSON object is ignored. */
export function parseMessage(data: unknown): WsMessage | null {
  if (typeof data !== "string") return null;
  try {
    const message = JSON.parse(data) as unknown;
    if (message && typeof message === "object" && typeof (message as { type?: unknown }).type === "string") {
      return message as WsMessage;
    }
  } catch {
    // A malformed frame must not kill the socket handler.
  }
  return null;
}

function patchRunSummary(queryClient: QueryClient, run: RunSummary): void {
  const detailKey = queryKeys.runDetail(run.id);
  const before = queryClient.getQueryData<RunDetail>(detailKey);
  queryClient.setQueryData<RunDetail>(detailKey, (old) => (old ? { ...old, ...run } : old));
  if (before && before.status !== run.status) {
    // The summary lacks attempts and log_tail, which change with the status.
    void queryClient.invalidateQueries({ queryKey: detailKey, exact: true });
  }
  queryClient.setQueriesData<RunPage>({ queryKey: queryKeys.runLists }, (page) => {
    // Other entries under ["runs"] (the runs table's key list) hold no runs.
    if (!page || !Array.isArray(page.results) || !page.results.some((r) => r.id === run.id)) return page;
    return { ...page, results: page.results.map((r) => (r.id === run.id ? { ...r, ...run } : r)) };
  });
}

function patchMetricKeys(old: MetricKeysResponse, points: readonly LivePoint[]): MetricKeysResponse {
  const keys: MetricKeyInfo[] = [...old.keys];
  const index = new Map(keys.map((k, i) => [k.key, i]));
  for (const [key, list] of groupPointsByKey(points)) {
    const newest = list.reduce((a, b) => (b.step >= a.step ? b : a));
    const at = index.get(key);
    if (at === undefined) {
      index.set(key, keys.length);
      keys.push({
        key,
        count: list.length,
        first_step: Math.min(...list.map((p) => p.step)),
        last_step: newest.step,
        last_value: toWireFloat(newest.value),
      });
      continue;
    }
    const info = keys[at] as MetricKeyInfo;
    keys[at] = {
      ...info,
      // An upper bound: a repeated step replaces a point rather than adding one.
      count: info.count + list.length,
      first_step: Math.min(info.first_step, ...list.map((p) => p.step)),
      last_step: Math.max(info.last_step, newest.step),
      last_value: newest.step >= info.last_step ? toWireFloat(newest.value) : info.last_value,
    };
  }
  return { keys };
}

function toWireFloat(value: number): MetricKeyInfo["last_value"] {
  if (Number.isNaN(value)) return "NaN";
  if (value === Number.POSITIVE_INFINITY) return "Infinity";
  if (value === Number.NEGATIVE_INFINITY) return "-Infinity";
  return value;
}

/**
 * Live points are appended raw, so a long-lived page would grow without bound.
 * Past twice the server's bound, refetch: downsampling is the server's job.
 */
function downsampleIfLong(queryClient: QueryClient, runId: number): void {
  for (const key of [queryKeys.metricSeries(runId), queryKeys.metricSeries(runId, true)]) {
    const all = queryClient.getQueryData<SeriesByKey>(key);
    if (!all || queryClient.getQueryState(key)?.fetchStatus === "fetching") continue;
    if (Object.values(all).some((s) => s.step.length > 2 * MAX_POINTS)) {
      // Not while a fetch runs: invalidating would cancel and restart it on every batch.
      void queryClient.invalidateQueries({ queryKey: key, exact: true });
    }
  }
}

/** Where a message stands in the run's event stream. */
export type SeqVerdict = "in-order" | "gap" | "new-epoch";

/**
 * Follows the run's event counter on one socket. The server tells a client
 * that fell behind to resync, but it can only see the gaps it was handed;
 * checking here too covers anything lost after that (a proxy, a bug). A new
 * epoch (the counter started again at 0 after a Redis restart) is a resync
 * too, never read as a gap or as events already seen.
 */
export class SeqTracker {
  private last: number | null = null;
  private epoch: string | null = null;

  observe(message: WsMessage): SeqVerdict {
    if (message.type === "resync" || typeof message.seq !== "number") return "in-order";
    const seq = message.seq;
    if (typeof message.epoch === "string" && message.epoch !== this.epoch) {
      const known = this.epoch !== null;
      this.epoch = message.epoch;
      this.last = seq;
      return known ? "new-epoch" : "in-order";
    }
    if (message.type === "run.snapshot" || this.last === null) {
      this.last = seq;
      return "in-order";
    }
    // Events from concurrent publishers may swap places: an older seq is no gap.
    const gap = seq > this.last + 1;
    this.last = Math.max(this.last, seq);
    return gap ? "gap" : "in-order";
  }

  /** True when `message` shows that the client must refetch: events were missed, or a new epoch began. */
  missed(message: WsMessage): boolean {
    return this.observe(message) !== "in-order";
  }
}

export { ReconnectBackoff, reconnectDelayMs } from "../../api/liveSocket";

/** Refetch everything about the run: after a `resync`, or a reconnect that may have missed messages. */
export function resyncRun(queryClient: QueryClient, runId: number): void {
  void queryClient.invalidateQueries({ queryKey: queryKeys.run(runId) });
}

/**
 * Apply one message. `now` stamps live points so that a series fetch in flight
 * can re-apply the ones its response may lack (see fetchRunSeries).
 */
export function applyRunMessage(
  queryClient: QueryClient,
  runId: number,
  message: WsMessage,
  now: number = performance.now(),
): void {
  switch (message.type) {
    case "run.snapshot":
    case "run.status":
      if (message.run.id === runId) patchRunSummary(queryClient, message.run);
      return;
    case "metrics.points": {
      if (message.run_id !== runId) return;
      const points = livePointsFromWire(message.series);
      if (points.length === 0) return;
      liveBufferFor(runId).record(points, now);
      // Until the first fetch lands there is nothing to patch (the updater
      // returns undefined, which leaves the cache alone); the buffer covers it.
      // The series read with and without wall times (the run page's x axis picks one).
      for (const times of [false, true]) {
        queryClient.setQueryData<SeriesByKey>(queryKeys.metricSeries(runId, times), (old) =>
          old ? mergeIntoAll(old, points) : old,
        );
      }
      queryClient.setQueryData<MetricKeysResponse>(queryKeys.metricKeys(runId), (old) =>
        old ? patchMetricKeys(old, points) : old,
      );
      downsampleIfLong(queryClient, runId);
      return;
    }
    case "resync":
      resyncRun(queryClient, runId);
      return;
    case "samples.added":
      if (message.run_id === runId) refreshSamplesSoon(queryClient, runId);
      return;
    case "checkpoint.registered":
      if (message.run_id === runId) void queryClient.invalidateQueries({ queryKey: queryKeys.checkpoints(runId) });
      return;
    case "alert.raised":
      if (message.run_id === runId) void queryClient.invalidateQueries({ queryKey: ["run", runId, "alerts"] });
      return;
    case "diagnosis.updated":
      if (message.run_id === runId) void queryClient.invalidateQueries({ queryKey: queryKeys.diagnosis(runId) });
      return;
    default:
      // Unknown types are for other views.
      return;
  }
}
