/**
 * From the bulk metrics answer to uPlot's columns: every run's series of one key on one shared
 * step axis (the union of their bucket steps), and groups of runs reduced to a mean line and a
 * band. Built once per fetch (or live batch) per key; nothing here is per point React state.
 *
 * Two kinds of hole: `undefined` where a run reports nothing at a step (uPlot draws the line on
 * through it), `null` where it reported NaN/±Infinity, or a value a log axis cannot place (uPlot
 * breaks the line there, as the run page does).
 */
import type uPlot from "uplot";

import { seriesFromWire, type Series } from "../../api/metrics";
import { smoothEma } from "../run/charts";
import type { RunMetricSeriesWire } from "./api";
import type { BandMode } from "./urlState";

export type Cell = number | null | undefined;

/** Series by key, then by run id. */
export type SeriesTable = Map<string, Map<number, Series>>;

export function tableFromWire(wire: readonly RunMetricSeriesWire[]): SeriesTable {
  const table: SeriesTable = new Map();
  for (const item of wire) {
    let byRun = table.get(item.key);
    if (!byRun) {
      byRun = new Map();
      table.set(item.key, byRun);
    }
    byRun.set(item.run, seriesFromWire(item));
  }
  return table;
}

export interface SeriesView {
  smoothing: number;
  logScale: boolean;
}

/** One key's runs on a shared step axis. */
export interface AlignedKey {
  /** Ascending steps: the union of the runs' bucket steps (or a grid, see `snapped`). */
  steps: Float64Array;
  /** One column per run, in the order given, as long as `steps`. */
  columns: Cell[][];
  /** Per column, the first and last index holding a value (null included); -1 when none. */
  first: Int32Array;
  last: Int32Array;
  /** True when the union was too long (past `maxSteps`) and steps were put on a coarser grid. */
  snapped: boolean;
}

/**
 * Past this many distinct steps the union is put on a grid: runs whose buckets never line up
 * (different lengths, different logging steps) would otherwise make a column per run as long as
 * all their buckets together, 100 runs × 100 000 cells per chart.
 */
export const MAX_ALIGNED_STEPS = 4000;

/** The values a run's line plots: smoothed means; non-finite, or ≤ 0 on a log axis, as null. */
export function plottedValues(series: Series, view: SeriesView): (number | null)[] {
  const values: (number | null)[] =
    view.smoothing > 0 ? smoothEma(series.mean, view.smoothing) : series.mean.map((v) => (Number.isFinite(v) ? v : null));
  return view.logScale ? values.map((v) => (v !== null && v > 0 ? v : null)) : values;
}

function uniqueSorted(values: Float64Array): Float64Array {
  values.sort();
  let n = 0;
  for (let i = 0; i < values.length; i++) {
    if (i === 0 || values[i] !== values[n - 1]) values[n++] = values[i] as number;
  }
  return values.slice(0, n);
}

/** A grid of steps: `origin + k × width`. */
export interface StepGrid {
  origin: number;
  width: number;
}

/**
 * The grid a group's runs are averaged on: the bucket spacing of its coarsest run (the median gap
 * between its steps), anchored on that run's steps. Runs of different lengths get buckets of
 * different widths from the server (a run cut short at 70 % gets narrower ones); on the union of
 * their steps each run would report at every other step, and the group's mean would zigzag
 * between its runs. On this grid every run has a value in (nearly) every cell. Null when no run
 * has two points.
 */
export function commonGrid(series: readonly (Series | undefined)[]): StepGrid | null {
  let best: StepGrid | null = null;
  for (const s of series) {
    if (!s || s.step.length < 2) continue;
    const gaps = new Float64Array(s.step.length - 1);
    for (let i = 1; i < s.step.length; i++) gaps[i - 1] = (s.step[i] as number) - (s.step[i - 1] as number);
    gaps.sort();
    const width = gaps[gaps.length >> 1] as number;
    if (!best || width > best.width) best = { origin: s.step[0] as number, width };
  }
  return best;
}

/**
 * Align one key's series (one per run, undefined for a run without the key). Each run's values
 * are smoothed on its own points first, so that another run's steps do not change its curve.
 * With a `grid` (groups), each point goes to the grid step at or after it (a bucket is reported
 * at its last step); points of one run in one cell are averaged.
 */
export function alignKey(
  series: readonly (Series | undefined)[],
  view: SeriesView,
  { maxSteps = MAX_ALIGNED_STEPS, grid = null }: { maxSteps?: number; grid?: StepGrid | null } = {},
): AlignedKey {
  let total = 0;
  for (const s of series) total += s?.step.length ?? 0;
  const all = new Float64Array(total);
  let at = 0;
  for (const s of series) {
    if (!s) continue;
    for (const step of s.step) all[at++] = step;
  }
  const raw = uniqueSorted(all);
  const lo = raw[0] ?? 0;
  const hi = raw[raw.length - 1] ?? 0;
  const gridOf = (origin: number, width: number) => (step: number) =>
    Math.min(hi, origin + Math.ceil((step - origin) / width) * width);
  let snap: ((step: number) => number) | null = grid && grid.width > 1 ? gridOf(grid.origin, grid.width) : null;
  let steps = snap ? uniqueSorted(raw.map(snap)) : raw;
  let snapped = false;
  if (steps.length > maxSteps) {
    const width = Math.max(grid?.width ?? 1, Math.ceil((hi - lo) / Math.max(1, maxSteps - 1)));
    snap = gridOf(grid?.origin ?? lo, width);
    steps = uniqueSorted(raw.map(snap));
    snapped = true;
  }
  const n = steps.length;
  const columns: Cell[][] = [];
  const first = new Int32Array(series.length).fill(-1);
  const last = new Int32Array(series.length).fill(-1);
  series.forEach((s, col) => {
    const column: Cell[] = new Array<Cell>(n).fill(undefined);
    columns.push(column);
    if (!s || s.step.length === 0) return;
    const values = plottedValues(s, view);
    let p = 0;
    // Points that land on one grid step are averaged (finite ones; all null stays null).
    let cell = -1;
    let sum = 0;
    let count = 0;
    let sawNull = false;
    const flush = () => {
      if (cell < 0) return;
      column[cell] = count > 0 ? sum / count : sawNull ? null : undefined;
      if (first[col] === -1) first[col] = cell;
      last[col] = cell;
    };
    for (let i = 0; i < s.step.length; i++) {
      const step = snap ? snap(s.step[i] as number) : (s.step[i] as number);
      while (p < n && (steps[p] as number) < step) p++;
      if (p !== cell) {
        flush();
        cell = p;
        sum = 0;
        count = 0;
        sawNull = false;
      }
      const value = values[i];
      if (value === null || value === undefined) sawNull = true;
      else {
        sum += value;
        count += 1;
      }
    }
    flush();
  });
  return { steps, columns, first, last, snapped };
}

/** A group's line and band: one value per aligned step. */
export interface GroupBand {
  mean: Cell[];
  lo: Cell[];
  hi: Cell[];
}

/**
 * Mean across `members` (column indices) at each step, with a band: min–max of the runs, or
 * mean ± standard error (needs two runs at that step; with one the band is left open there).
 * A run reporting nothing at a step is left out of that step; a step where every reporting run
 * has a gap (null) is a gap; where none reports, undefined.
 */
export function groupBand(aligned: AlignedKey, members: readonly number[], mode: BandMode, logScale = false): GroupBand {
  const n = aligned.steps.length;
  const mean: Cell[] = new Array<Cell>(n).fill(undefined);
  const lo: Cell[] = new Array<Cell>(n).fill(undefined);
  const hi: Cell[] = new Array<Cell>(n).fill(undefined);
  const cols = members.map((m) => aligned.columns[m]).filter((c): c is Cell[] => c !== undefined);
  for (let j = 0; j < n; j++) {
    let count = 0;
    let sum = 0;
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    let sawNull = false;
    for (const col of cols) {
      const v = col[j];
      if (v === undefined) continue;
      if (v === null) {
        sawNull = true;
        continue;
      }
      count += 1;
      sum += v;
      if (v < min) min = v;
      if (v > max) max = v;
    }
    if (count === 0) {
      if (sawNull) mean[j] = lo[j] = hi[j] = null;
      continue;
    }
    const m = sum / count;
    mean[j] = m;
    if (mode === "minmax") {
      lo[j] = min;
      hi[j] = max;
    } else if (count >= 2) {
      let squares = 0;
      for (const col of cols) {
        const v = col[j];
        if (typeof v === "number") squares += (v - m) * (v - m);
      }
      const se = Math.sqrt(squares / (count - 1)) / Math.sqrt(count);
      lo[j] = logScale && m - se <= 0 ? null : m - se;
      hi[j] = m + se;
    }
  }
  return { mean, lo, hi };
}

/** What one chart draws: each run, or each group as mean, low and high edge. */
export type ChartLayout = { kind: "runs" } | { kind: "groups"; groups: readonly (readonly number[])[]; band: BandMode };

/** uPlot's columns: [steps, run 0, run 1, ...] or [steps, mean 0, lo 0, hi 0, mean 1, ...]. */
export function chartData(aligned: AlignedKey, layout: ChartLayout, logScale = false): uPlot.AlignedData {
  if (layout.kind === "runs") return [aligned.steps, ...aligned.columns];
  const out: Cell[][] = [];
  for (const members of layout.groups) {
    const band = groupBand(aligned, members, layout.band, logScale);
    out.push(band.mean, band.lo, band.hi);
  }
  return [aligned.steps, ...out];
}

/** Series per entry in a layout: 1 for a run, 3 (mean, lo, hi) for a group. */
export function seriesPerEntry(layout: ChartLayout): number {
  return layout.kind === "runs" ? 1 : 3;
}
