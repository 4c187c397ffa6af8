/**
 * The client's model of metric series: column arrays as the API sends them,
 * floats parsed (NaN/±Infinity kept as JS numbers), plus the pure functions
 * that merge live websocket points into them.
 */
import { parseWireFloat, parseWireFloats } from "./nonfinite";
import type { LiveSeriesWire, MetricSeriesWire } from "./types";

export interface Series {
  key: string;
  /** Raw points the series stands for (buckets may hold several). */
  count: number;
  /** Ascending steps; one entry per plotted point (bucket). */
  step: number[];
  min: number[];
  max: number[];
  mean: number[];
  last: number[];
  /**
   * Wall time (epoch seconds) of the point at each step, when the series was read with times
   * (`?times=1`): null where that point is gone. Absent otherwise.
   */
  time?: (number | null)[];
}

/** Series of one run by key, in the order they were listed. */
export type SeriesByKey = Record<string, Series>;

export interface LivePoint {
  key: string;
  step: number;
  value: number;
  /** The point's wall time (epoch seconds), as the live message gives it. */
  time?: number;
}

export function seriesFromWire(wire: MetricSeriesWire): Series {
  return {
    key: wire.key,
    count: wire.count,
    step: [...wire.step],
    min: parseWireFloats(wire.min),
    max: parseWireFloats(wire.max),
    mean: parseWireFloats(wire.mean),
    last: parseWireFloats(wire.last),
    ...(wire.time ? { time: wire.time.map((t) => (typeof t === "number" ? t : null)) } : {}),
  };
}

/** The points of a live `metrics.points` message (columns per key), one by one. */
export function livePointsFromWire(series: readonly LiveSeriesWire[]): LivePoint[] {
  const points: LivePoint[] = [];
  for (const { key, steps, values, times } of series) {
    steps.forEach((step, i) => {
      const time = times?.[i];
      points.push(time === undefined ? { key, step, value: parseWireFloat(values[i]) } : { key, step, value: parseWireFloat(values[i]), time });
    });
  }
  return points;
}

export function emptySeries(key: string): Series {
  return { key, count: 0, step: [], min: [], max: [], mean: [], last: [] };
}

/** Index of the first step >= target (binary search; steps ascend). */
export function lowerBound(steps: readonly number[], target: number): number {
  let lo = 0;
  let hi = steps.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((steps[mid] as number) < target) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Return a new series with the points merged in step order. A point at a step
 * the series already has replaces that entry (ingest is idempotent on
 * (run, key, step), so a repeated step is a correction, not a new point).
 * The input series is not modified: the query cache relies on new objects.
 */
export function mergePoints(series: Series, points: readonly LivePoint[]): Series {
  if (points.length === 0) return series;
  const out: Series = {
    key: series.key,
    count: series.count,
    step: series.step.slice(),
    min: series.min.slice(),
    max: series.max.slice(),
    mean: series.mean.slice(),
    last: series.last.slice(),
  };
  // A series read with times keeps them aligned: a live point without one (an older server) has none.
  const time = series.time?.slice() ?? (series.step.length === 0 && points.some((p) => p.time !== undefined) ? [] : undefined);
  if (time) out.time = time;
  for (const { step, value, time: when } of points) {
    const n = out.step.length;
    // Live points nearly always come after the last step: append without searching.
    const at = n === 0 || (out.step[n - 1] as number) < step ? n : lowerBound(out.step, step);
    if (at < n && out.step[at] === step) {
      out.min[at] = value;
      out.max[at] = value;
      out.mean[at] = value;
      out.last[at] = value;
      if (time) time[at] = when ?? null;
      continue;
    }
    out.step.splice(at, 0, step);
    out.min.splice(at, 0, value);
    out.max.splice(at, 0, value);
    out.mean.splice(at, 0, value);
    out.last.splice(at, 0, value);
    time?.splice(at, 0, when ?? null);
    out.count += 1;
  }
  return out;
}

export function groupPointsByKey(points: readonly LivePoint[]): Map<string, LivePoint[]> {
  const byKey = new Map<string, LivePoint[]>();
  for (const point of points) {
    const list = byKey.get(point.key);
    if (list) list.push(point);
    else byKey.set(point.key, [point]);
  }
  return byKey;
}

/**
 * Merge points of any keys into a run's series; keys not seen before get a
 * new series. Untouched series keep their identity so their charts skip work.
 */
export function mergeIntoAll(all: SeriesByKey, points: readonly LivePoint[]): SeriesByKey {
  if (points.length === 0) return all;
  const next: SeriesByKey = { ...all };
  for (const [key, list] of groupPointsByKey(points)) {
    next[key] = mergePoints(all[key] ?? emptySeries(key), list);
  }
  return next;
}

/**
 * After a (re)fetch, re-apply live points that arrived while the request was
 * in flight and that the response may not contain. Only points past a series'
 * last step are applied: earlier ones are already inside the server's buckets,
 * and inserting them raw would double-count a downsampled range.
 */
export function applyLatePoints(fetched: SeriesByKey, late: readonly LivePoint[]): SeriesByKey {
  const newer = late.filter((point) => {
    const series = fetched[point.key];
    if (!series || series.step.length === 0) return true;
    return point.step > (series.step[series.step.length - 1] as number);
  });
  return mergeIntoAll(fetched, newer);
}

/**
 * Recent live points of one run with the time they arrived, so a fetch can
 * pick up what came in while it was in flight. Bounded by age and size.
 */
export class LiveBuffer {
  private entries: { at: number; point: LivePoint }[] = [];

  constructor(
    private readonly maxAgeMs = 120_000,
    private readonly maxEntries = 20_000,
  ) {}

  record(points: readonly LivePoint[], now: number): void {
    for (const point of points) this.entries.push({ at: now, point });
    const cutoff = now - this.maxAgeMs;
    let drop = 0;
    while (drop < this.entries.length && (this.entries[drop] as { at: number }).at < cutoff) drop += 1;
    drop = Math.max(drop, this.entries.length - this.maxEntries);
    if (drop > 0) this.entries.splice(0, drop);
  }

  /** Points that arrived at or after `since`, oldest first. */
  since(since: number): LivePoint[] {
    return this.entries.filter((entry) => entry.at >= since).map((entry) => entry.point);
  }
}

const buffers = new Map<number, LiveBuffer>();

export function liveBufferFor(runId: number): LiveBuffer {
  let buffer = buffers.get(runId);
  if (!buffer) {
    buffer = new LiveBuffer();
    buffers.set(runId, buffer);
  }
  return buffer;
}

/** Split keys into groups whose comma-joined length stays under a URL-safe bound. */
export function chunkKeys(keys: readonly string[], maxChars = 1500): string[][] {
  const chunks: string[][] = [];
  let current: string[] = [];
  let length = 0;
  for (const key of keys) {
    const cost = encodeURIComponent(key).length + 1;
    if (current.length > 0 && length + cost > maxChars) {
      chunks.push(current);
      current = [];
      length = 0;
    }
    current.push(key);
    length += cost;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}
