/**
 * The compare page's API: the bulk metrics read (POST /metrics/query) and its cache, the runs'
 * details and keys (POST /compare/runs, put into the run page's cache entries), and the patching
 * of cached comparisons with live points. Kept beside the page: nothing else uses them.
 */
import { keepPreviousData, useQueries, useQuery, useQueryClient, type QueryClient } from "@tanstack/react-query";

import { apiRequest } from "../../api/client";
import { metricKeysOptions } from "../../api/hooks";
import { applyLatePoints, emptySeries, liveBufferFor, mergePoints, type LivePoint, type SeriesByKey } from "../../api/metrics";
import { queryKeys } from "../../api/queryKeys";
import type { components } from "../../api/schema.gen";
import type { MetricKeysResponse, RunDetail, RunPage } from "../../api/types";
import { tableFromWire, type SeriesTable } from "./align";

type Schemas = components["schemas"];

export type RunMetricSeriesWire = Schemas["RunMetricSeries"];
export type MetricsQueryRequest = Schemas["MetricsQueryInRequest"];
export type MetricsQueryResponse = Schemas["MetricQueryOut"];
export type CompareRunsResponse = Schemas["CompareRunsOut"];

/** The server's bounds on one POST /metrics/query (runs per request; series, BARREL_METRICS_MAX_QUERY_SERIES). */
export const MAX_QUERY_RUNS = 100;
export const MAX_QUERY_SERIES = 2000;
/** Buckets per series: the run page's bound, less when many series share one answer. */
export const MAX_BUCKETS = 1000;
export const MIN_BUCKETS = 200;
/**
 * Buckets in one comparison, all series together. 100 runs × 10 keys × 1000 buckets would be
 * 40 MB of JSON for charts some 600 px wide; zooming asks again for the range at full detail.
 */
export const BUCKET_BUDGET = 300_000;

export function bucketsFor(runs: number, keys: number): number {
  const series = Math.max(1, runs * keys);
  return Math.min(MAX_BUCKETS, Math.max(MIN_BUCKETS, Math.floor(BUCKET_BUDGET / series)));
}

/** Steps in a zoomed view, both ends included. */
export interface StepRange {
  min: number;
  max: number;
}

export interface SeriesQuery {
  runs: number[];
  keys: string[];
  maxPoints: number;
  range: StepRange | null;
}

export const compareKeys = {
  all: ["compare"] as const,
  series: ["compare", "series"] as const,
  seriesOf: (query: SeriesQuery) => ["compare", "series", query] as const,
  runs: (runIds: readonly number[]) => ["compare", "runs", runIds] as const,
  pick: (name: string) => ["compare", "pick", name] as const,
};

/** Request bodies covering the query: runs split so that no request passes the server's bounds. */
export function queryBodies(query: SeriesQuery): MetricsQueryRequest[] {
  if (query.runs.length === 0 || query.keys.length === 0) return [];
  const perRequest = Math.max(1, Math.min(MAX_QUERY_RUNS, Math.floor(MAX_QUERY_SERIES / query.keys.length)));
  const bodies: MetricsQueryRequest[] = [];
  for (let i = 0; i < query.runs.length; i += perRequest) {
    bodies.push({
      runs: query.runs.slice(i, i + perRequest),
      keys: query.keys,
      max_points: query.maxPoints,
      ...(query.range ? { start: Math.max(0, Math.floor(query.range.min)), end: Math.max(0, Math.ceil(query.range.max)) } : {}),
    });
  }
  return bodies;
}

function inRange(step: number, range: StepRange | null): boolean {
  return range === null || (step >= range.min && step <= range.max);
}

/** A copy of `table` with one run's live points merged in (untouched keys keep their identity). */
export function mergeRunPoints(table: SeriesTable, runId: number, points: readonly LivePoint[]): SeriesTable {
  return mergeRunsPoints(table, new Map([[runId, points]]));
}

/** The points of `points` that a cached comparison shows: its keys, inside its range. */
export function pointsFor(query: SeriesQuery, runId: number, points: readonly LivePoint[]): LivePoint[] {
  if (!query.runs.includes(runId)) return [];
  const keys = new Set(query.keys);
  return points.filter((p) => keys.has(p.key) && inRange(p.step, query.range));
}

/**
 * One request per chunk of runs, merged; then the live points that came in while the requests
 * were in flight and that the answer may lack (as the run page's fetch does).
 */
export async function fetchCompareSeries(query: SeriesQuery, signal?: AbortSignal): Promise<SeriesTable> {
  const startedAt = performance.now();
  const answers = await Promise.all(
    queryBodies(query).map((body) =>
      apiRequest<MetricsQueryResponse>("/metrics/query", { method: "POST", body, signal }),
    ),
  );
  let table = tableFromWire(answers.flatMap((answer) => answer.series));
  for (const runId of query.runs) {
    const late = pointsFor(query, runId, liveBufferFor(runId).since(startedAt));
    if (late.length === 0) continue;
    const fetched: SeriesByKey = {};
    for (const [key, byRun] of table) {
      const series = byRun.get(runId);
      if (series) fetched[key] = series;
    }
    const merged = applyLatePoints(fetched, late);
    for (const [key, series] of Object.entries(merged)) {
      if (fetched[key] === series) continue;
      const byRun = new Map(table.get(key) ?? []);
      byRun.set(runId, series);
      table = new Map(table).set(key, byRun);
    }
  }
  return table;
}

/**
 * Ask for a comparison before the page needs it: with its keys in the URL the page knows its
 * bulk read before the runs' details and keys are in, and sends both at once (one round trip
 * less before the charts). The page's useCompareSeries then finds the answer, or the request in flight.
 */
export function prefetchCompareSeries(queryClient: QueryClient, query: SeriesQuery): Promise<void> {
  return queryClient.prefetchQuery({
    queryKey: compareKeys.seriesOf(query),
    queryFn: ({ signal }) => fetchCompareSeries(query, signal),
    staleTime: Number.POSITIVE_INFINITY,
  });
}

export function useCompareSeries(query: SeriesQuery, enabled: boolean, keepPrevious: boolean) {
  return useQuery({
    queryKey: compareKeys.seriesOf(query),
    queryFn: ({ signal }) => fetchCompareSeries(query, signal),
    enabled: enabled && query.runs.length > 0 && query.keys.length > 0,
    // Live points patch these entries; a resync invalidates them.
    staleTime: Number.POSITIVE_INFINITY,
    // Megabytes of floats: comparing old and new answers point by point would cost more than it saves.
    structuralSharing: false,
    ...(keepPrevious ? { placeholderData: keepPreviousData } : {}),
  });
}

/** Runs per POST /compare/runs (the server's bound, controlplane.compare.runs.MAX_RUNS). */
export const MAX_COMPARE_RUNS = 100;

/**
 * Every run's detail and metric keys in one request per 100 runs, written into the run page's
 * cache entries (which useRunDetails and useRunKeys then find fresh). A run the caller cannot
 * see fails the whole request (404, as POST /metrics/query): the per-run reads then name it.
 */
export async function fetchCompareRuns(queryClient: QueryClient, runIds: readonly number[], signal?: AbortSignal): Promise<number> {
  const chunks: number[][] = [];
  for (let i = 0; i < runIds.length; i += MAX_COMPARE_RUNS) chunks.push(runIds.slice(i, i + MAX_COMPARE_RUNS));
  const answers = await Promise.all(
    chunks.map((runs) => apiRequest<CompareRunsResponse>("/compare/runs", { method: "POST", body: { runs }, signal })),
  );
  let count = 0;
  for (const answer of answers) {
    for (const { run, keys } of answer.runs) {
      queryClient.setQueryData<RunDetail>(queryKeys.runDetail(run.id), run);
      queryClient.setQueryData<MetricKeysResponse>(queryKeys.metricKeys(run.id), { keys });
      count += 1;
    }
  }
  return count;
}

export function useCompareRuns(runIds: readonly number[]) {
  const queryClient = useQueryClient();
  return useQuery({
    queryKey: compareKeys.runs(runIds),
    queryFn: ({ signal }) => fetchCompareRuns(queryClient, runIds, signal),
    // Its answer lives on in the runs' own cache entries, which live feeds keep current.
    staleTime: Number.POSITIVE_INFINITY,
    retry: false,
  });
}

/** Each run's detail (name, status, config): the run page's cache entries. */
export function useRunDetails(runIds: readonly number[], enabled = true) {
  return useQueries({
    queries: runIds.map((runId) => ({
      queryKey: queryKeys.runDetail(runId),
      queryFn: ({ signal }: { signal: AbortSignal }) => apiRequest<RunDetail>(`/runs/${runId}`, { signal }),
      // Statuses of live runs come over their sockets; configs do not change.
      staleTime: 30_000,
      enabled,
    })),
  });
}

/** Each run's metric keys (kept current by the live feeds, as on the run page). */
export function useRunKeys(runIds: readonly number[], enabled = true) {
  return useQueries({ queries: runIds.map((runId) => ({ ...metricKeysOptions(runId), enabled })) });
}

/** Runs whose names contain `name`, newest first: the picker's list. */
export const PICK_LIMIT = 50;

export function usePickableRuns(name: string) {
  return useQuery({
    queryKey: compareKeys.pick(name),
    queryFn: ({ signal }) =>
      apiRequest<RunPage>("/runs", { query: { limit: PICK_LIMIT, name: name || undefined }, signal }),
    placeholderData: keepPreviousData,
    staleTime: 10_000,
  });
}

/** Past this many points a live-patched series is fetched again, downsampled by the server. */
function tooLong(table: SeriesTable, maxPoints: number): boolean {
  for (const byRun of table.values()) for (const series of byRun.values()) if (series.step.length > 2 * maxPoints) return true;
  return false;
}

/** A copy of `table` with several runs' live points merged in: each touched key copied once. */
export function mergeRunsPoints(table: SeriesTable, pointsByRun: ReadonlyMap<number, readonly LivePoint[]>): SeriesTable {
  const byKey = new Map<string, Map<number, LivePoint[]>>();
  for (const [runId, points] of pointsByRun) {
    for (const point of points) {
      let runs = byKey.get(point.key);
      if (!runs) byKey.set(point.key, (runs = new Map()));
      const list = runs.get(runId);
      if (list) list.push(point);
      else runs.set(runId, [point]);
    }
  }
  if (byKey.size === 0) return table;
  const next: SeriesTable = new Map(table);
  for (const [key, runs] of byKey) {
    const byRun = new Map(table.get(key) ?? []);
    for (const [runId, list] of runs) byRun.set(runId, mergePoints(byRun.get(runId) ?? emptySeries(key), list));
    next.set(key, byRun);
  }
  return next;
}

/**
 * Apply runs' live points to every cached comparison that shows them: one new table per
 * comparison however many runs' points came (a frame's worth, see LiveFeeds).
 */
export function patchComparisons(queryClient: QueryClient, pointsByRun: ReadonlyMap<number, readonly LivePoint[]>): void {
  for (const query of queryClient.getQueryCache().findAll({ queryKey: compareKeys.series })) {
    const params = query.queryKey[2] as SeriesQuery | undefined;
    if (!params) continue;
    const wanted = new Map<number, LivePoint[]>();
    for (const [runId, points] of pointsByRun) {
      const shown = pointsFor(params, runId, points);
      if (shown.length > 0) wanted.set(runId, shown);
    }
    if (wanted.size === 0) continue;
    // Until the first answer lands there is nothing to patch; the live buffer covers it.
    const next = queryClient.setQueryData<SeriesTable>(query.queryKey, (old) => (old ? mergeRunsPoints(old, wanted) : old));
    if (next && query.state.fetchStatus !== "fetching" && tooLong(next, params.maxPoints)) {
      void queryClient.invalidateQueries({ queryKey: query.queryKey, exact: true });
    }
  }
}

/** Ask again for every cached comparison that shows one of these runs (after a resync, a sleep). */
export function resyncComparisons(queryClient: QueryClient, runIds: readonly number[]): void {
  void queryClient.invalidateQueries({
    queryKey: compareKeys.series,
    predicate: (query) => {
      const params = query.queryKey[2] as SeriesQuery | undefined;
      return params !== undefined && params.runs.some((id) => runIds.includes(id));
    },
  });
}
