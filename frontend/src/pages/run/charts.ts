import type uPlot from "uplot";

import { toPlottable } from "../../api/nonfinite";
import { lowerBound, type Series } from "../../api/metrics";

/**
 * Namespaces in the order a researcher reads a run: what it learns (reward, held-out eval), whether
 * the reward can be trusted (the sandbox's and the reward pipeline's health, beside the reward: a
 * sandbox failing makes rewards go missing, not wrong), what an agent's episodes did (turns, tool
 * calls and their errors: the sandbox's other user), whether rollout and trainer agree (mismatch),
 * then the design's order; others follow alphabetically.
 */
export const NAMESPACE_ORDER = [
  "reward",
  "eval",
  "sandbox",
  "reward_pipeline",
  "agent",
  "mismatch",
  "response_length",
  "policy",
  "offpolicy",
  "time",
  "idle",
  "perf",
  "system",
] as const;

/** Keys without a "/" have no namespace; they are shown last under this name. */
export const NO_NAMESPACE = "other";

/** The part of a key before the first "/". */
export function namespaceOf(key: string): string {
  const slash = key.indexOf("/");
  return slash > 0 ? key.slice(0, slash) : NO_NAMESPACE;
}

export interface NamespaceGroup {
  namespace: string;
  keys: string[];
}

function namespaceRank(namespace: string): number {
  const known = (NAMESPACE_ORDER as readonly string[]).indexOf(namespace);
  if (known >= 0) return known;
  return namespace === NO_NAMESPACE ? NAMESPACE_ORDER.length + 1 : NAMESPACE_ORDER.length;
}

/** Group keys by namespace: known namespaces first in design order, keys sorted within. */
export function groupByNamespace(keys: Iterable<string>): NamespaceGroup[] {
  const groups = new Map<string, string[]>();
  for (const key of new Set(keys)) {
    const namespace = namespaceOf(key);
    const list = groups.get(namespace);
    if (list) list.push(key);
    else groups.set(namespace, [key]);
  }
  return [...groups.entries()]
    .sort(([a], [b]) => namespaceRank(a) - namespaceRank(b) || a.localeCompare(b))
    .map(([namespace, list]) => ({ namespace, keys: list.sort((a, b) => a.localeCompare(b)) }));
}

/**
 * TensorBoard's smoothing: an exponential moving average of the finite values, debiased for its
 * start (divided by 1 - weight^n, so the first points are not pulled toward 0 and a constant
 * series stays put). `weight` is from 0 (no smoothing) to just under 1; a non-finite value is
 * left out of the average and drawn as a gap.
 */
export function smoothEma(values: readonly number[], weight: number): (number | null)[] {
  const w = Math.min(Math.max(weight, 0), 0.999);
  let last = 0;
  let debias = 0;
  return values.map((value) => {
    if (!Number.isFinite(value)) return null;
    last = last * w + (1 - w) * value;
    debias = debias * w + (1 - w);
    return last / debias;
  });
}

/**
 * What the charts' x axis is: the step, the wall time since the run's first point (TensorBoard's
 * "Relative", W&B's "Relative Time"), or the wall clock in local time.
 */
export type XAxis = "step" | "relative" | "wall";

export const X_AXES: readonly { value: XAxis; label: string }[] = [
  { value: "step", label: "Step" },
  { value: "relative", label: "Relative time" },
  { value: "wall", label: "Wall clock" },
];

/** What the run page's charts show: smoothing weight, a log y axis and what the x axis is. */
export interface ChartView {
  smoothing: number;
  logScale: boolean;
  xAxis: XAxis;
}

export const DEFAULT_VIEW: ChartView = { smoothing: 0, logScale: false, xAxis: "step" };

/** A view as stored (this browser's localStorage, maybe from an older version): what is not valid is the default. */
export function viewFrom(saved: unknown): ChartView {
  const v = (saved && typeof saved === "object" ? saved : {}) as Partial<Record<keyof ChartView, unknown>>;
  return {
    smoothing:
      typeof v.smoothing === "number" && v.smoothing >= 0 && v.smoothing < 1 ? v.smoothing : DEFAULT_VIEW.smoothing,
    logScale: typeof v.logScale === "boolean" ? v.logScale : DEFAULT_VIEW.logScale,
    xAxis: X_AXES.some((x) => x.value === v.xAxis) ? (v.xAxis as XAxis) : DEFAULT_VIEW.xAxis,
  };
}

/** True when the x axis is a time (the series must be read with their wall times). */
export function isTimeAxis(xAxis: XAxis): boolean {
  return xAxis !== "step";
}

/** The earliest wall time of any point of the run (what "Relative time" counts from); null without times. */
export function timeOrigin(all: Iterable<Series>): number | null {
  let origin: number | null = null;
  for (const series of all) {
    for (const t of series.time ?? []) if (t !== null && (origin === null || t < origin)) origin = t;
  }
  return origin;
}

/**
 * What a chart plots: uPlot columns [x, mean, min, max, smoothed mean], the step of each plotted
 * point (for the legend), and the step → x map in step order (for marks and zoom).
 */
export interface Plotted {
  data: uPlot.AlignedData;
  steps: number[];
  map: XMap;
}

/** x at each step, steps ascending; a step without a time has no entry. */
export interface XMap {
  steps: number[];
  xs: number[];
}

/**
 * The x of each point of the series: its step, or its wall time (less `origin` for relative
 * time), in step order. Points with no time (gone, or a series read without times) are left out.
 */
export function xMapOf(series: Series, xAxis: XAxis, origin: number | null): XMap {
  const kept = timedPoints(series, xAxis);
  if (kept === null) return { steps: series.step, xs: series.step };
  const shift = xAxis === "relative" ? (origin ?? 0) : 0;
  return { steps: kept.map((i) => series.step[i] as number), xs: kept.map((i) => (series.time?.[i] as number) - shift) };
}

/** Positions of the points with a time, in step order; null against steps (every point). */
function timedPoints(series: Series, xAxis: XAxis): number[] | null {
  if (xAxis === "step") return null;
  const time = series.time ?? [];
  const kept: number[] = [];
  series.step.forEach((_, i) => {
    const t = time[i];
    if (t != null && Number.isFinite(t)) kept.push(i);
  });
  return kept;
}

/**
 * The series as uPlot data against `view.xAxis`. NaN and ±Infinity become null, which uPlot
 * draws as a gap (a diverged loss shows as a hole, not a crash); on a log axis, so do values at
 * or below zero. Against time, points are drawn in time order (a resumed run re-logs steps later
 * than the ones after them were first logged: uPlot needs ascending x).
 */
export function plotted(series: Series, view: ChartView = DEFAULT_VIEW, origin: number | null = null): Plotted {
  const plottable = view.logScale ? (v: number) => (v > 0 ? toPlottable(v) : null) : toPlottable;
  const map = xMapOf(series, view.xAxis, origin);
  let index = timedPoints(series, view.xAxis); // positions in `series` of the plotted points, in x order
  let xs = map.xs;
  if (index !== null && !xs.every((x, k) => k === 0 || (xs[k - 1] as number) <= x)) {
    const order = xs.map((_, k) => k).sort((a, b) => (xs[a] as number) - (xs[b] as number));
    index = order.map((k) => (index as number[])[k] as number);
    xs = order.map((k) => xs[k] as number);
  }
  const pick = (column: readonly number[]) => (index ? index.map((i) => column[i] as number) : column.slice());
  const mean = pick(series.mean);
  const smoothed = smoothEma(mean, view.smoothing).map((v) => (v === null ? null : plottable(v)));
  return {
    data: [xs, mean.map(plottable), pick(series.min).map(plottable), pick(series.max).map(plottable), smoothed],
    steps: index ? pick(series.step) : series.step,
    map,
  };
}

/** uPlot columns [step, mean, min, max, smoothed mean] (or [x, ...] against time: see plotted). */
export function toUplotData(series: Series, view: ChartView = DEFAULT_VIEW, origin: number | null = null): uPlot.AlignedData {
  return plotted(series, view, origin).data;
}

/**
 * The x of a step (a checkpoint's, say) on a chart against `map`: the x of the step's own point,
 * else interpolated linearly between the points either side; null beyond the first or last point.
 */
export function xOfStep(map: XMap, step: number): number | null {
  const { steps, xs } = map;
  const i = lowerBound(steps, step);
  if (i >= steps.length) return null;
  if (steps[i] === step) return xs[i] as number;
  if (i === 0) return null;
  const [s0, s1, x0, x1] = [steps[i - 1] as number, steps[i] as number, xs[i - 1] as number, xs[i] as number];
  return x0 + ((step - s0) / (s1 - s0)) * (x1 - x0);
}

/**
 * The steps to ask the server for when a chart against `map` is zoomed to x in [min, max]: from
 * the last point at or before min to the first at or after max (a bucket's x is its last point's,
 * so the points just outside hold the steps of the edges), as whole steps; null for no range.
 */
export function stepsOfXRange(map: XMap, min: number | undefined, max: number | undefined): [number, number] | null {
  if (min == null || max == null || !Number.isFinite(min) || !Number.isFinite(max) || max < min) return null;
  const { steps, xs } = map;
  if (steps.length === 0) return null;
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  let before = -1; // the point with the largest x <= min
  let after = -1; // the point with the smallest x >= max
  xs.forEach((x, i) => {
    if (x >= min && x <= max) {
      lo = Math.min(lo, steps[i] as number);
      hi = Math.max(hi, steps[i] as number);
    }
    if (x <= min && (before < 0 || x >= (xs[before] as number))) before = i;
    if (x >= max && (after < 0 || x < (xs[after] as number))) after = i;
  });
  if (before >= 0) lo = Math.min(lo, steps[before] as number);
  if (after >= 0) hi = Math.max(hi, steps[after] as number);
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return null;
  return [Math.max(0, Math.floor(lo)), Math.max(0, Math.ceil(hi))];
}

/** Whether x in [min, max] shows less than all of xs (a zoom), against any x axis. */
export function isZoomedIn(xs: readonly number[], min: number | undefined, max: number | undefined): boolean {
  if (xs.length === 0 || min == null || max == null) return false;
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (const x of xs) {
    first = Math.min(first, x);
    last = Math.max(last, x);
  }
  return min > first || max < last;
}

/**
 * The steps to ask the server for when a chart of `overview` shows x in [min, max]; null when it
 * shows all of it (no zoom). Against steps, the whole steps of the range; against time, the
 * dragged range mapped back to steps on `shown` (the points plotted: a zoom's own, inside a zoom).
 */
export function zoomSteps(
  overview: Series,
  shown: XMap | null,
  xAxis: XAxis,
  origin: number | null,
  min: number | undefined,
  max: number | undefined,
): [number, number] | null {
  if (xAxis === "step") {
    const full = overview.step;
    const range = stepRange(min, max);
    const zoomed = range !== null && full.length > 0 && (range[0] > full[0]! || range[1] < full[full.length - 1]!);
    return zoomed ? range : null;
  }
  if (!shown || !isZoomedIn(xMapOf(overview, xAxis, origin).xs, min, max)) return null;
  return stepsOfXRange(shown, min, max);
}

/**
 * Labels of a relative-time axis (seconds since the run's first point) in one unit for all its
 * ticks, picked by the largest: seconds under 2 minutes, minutes under 2 hours, hours beyond;
 * "90s", "2.5min", "36h".
 */
export function formatElapsed(splits: readonly number[]): string[] {
  const finite = splits.filter(Number.isFinite).map(Math.abs);
  const largest = finite.length ? Math.max(...finite) : 0;
  const [unit, suffix] = largest < 120 ? [1, "s"] : largest < 7200 ? [60, "min"] : [3600, "h"];
  const labels = formatTicks(splits.map((v) => v / unit));
  return labels.map((label, i) => (Number.isFinite(splits[i]) ? `${label}${suffix}` : label));
}

/** One time since the run's first point, for the legend: "42.5s", "12min 5s", "3h 20min". */
export function formatElapsedValue(seconds: number): string {
  if (!Number.isFinite(seconds)) return "–";
  const sign = seconds < 0 ? "-" : "";
  const s = Math.abs(seconds);
  if (s < 60) return `${sign}${Number(s.toFixed(s < 10 ? 2 : 1))}s`;
  if (s < 3600) return `${sign}${Math.floor(s / 60)}min ${Math.floor(s % 60)}s`;
  return `${sign}${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}min`;
}

/**
 * Tick spacings of a relative-time axis, in seconds: whole seconds, minutes and hours as a
 * clock divides them (1, 2, 5, 10, 15, 30 s; 1, 2, 5, 10, 15, 30 min; 1, 2, 3, 6, 12 h; days).
 */
export const ELAPSED_INCREMENTS: number[] = [
  0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
  ...Array.from({ length: 12 }, (_, k) => [1, 2, 5].map((m) => m * 86400 * 10 ** k)).flat(),
];

/** Spread, relative to the values, below which a chart draws its data as flat. */
export const FLAT_SPREAD = 1e-6;

/**
 * The y range for data flat up to float noise (an importance ratio of
 * 1 ± 2e-7, say), else null for uPlot's own ranging. On such data uPlot's
 * tick loop never ends and the tab dies (leeoniya/uPlot#1084, left to
 * callers), so the value gets 1% of room either side (±1 around 0).
 */
export function flatRange(min: number, max: number): [number, number] | null {
  const magnitude = Math.max(Math.abs(min), Math.abs(max));
  if (max - min > magnitude * FLAT_SPREAD) return null;
  const mid = (min + max) / 2;
  const pad = mid === 0 ? 1 : Math.abs(mid) * 0.01;
  return [mid - pad, mid + pad];
}

/** True when every bucket holds one raw point, i.e. the band would be empty. */
export function isRaw(series: Series): boolean {
  return series.min.every((min, i) => Object.is(min, series.max[i]));
}

/** Latest value of the series (its last bucket's last point). */
export function latestValue(series: Series): number | undefined {
  return series.last[series.last.length - 1];
}

/**
 * Labels for one axis's ticks, with just enough digits that neighbours differ.
 * (uPlot's default goes through Intl.NumberFormat, which stops at three
 * decimals and would label 0.0005 and 0.001 both as "0.001"; KL values live
 * down there.)
 */
export function formatTicks(splits: readonly number[]): string[] {
  const finite = splits.filter(Number.isFinite);
  if (finite.length === 0) return splits.map(String);
  let step = Number.POSITIVE_INFINITY;
  for (let i = 1; i < finite.length; i++) {
    const diff = Math.abs((finite[i] as number) - (finite[i - 1] as number));
    if (diff > 0) step = Math.min(step, diff);
  }
  const maxAbs = Math.max(...finite.map(Math.abs));
  const tolerance = Number.isFinite(step) ? step * 1e-6 : 1e-12;
  let decimals = 0;
  while (decimals < 12 && finite.some((v) => Math.abs(Number(v.toFixed(decimals)) - v) > tolerance)) decimals += 1;
  // Fixed notation while it stays short: up to 4 decimals, or up to 8 when the values are not
  // tiny (a series that varies in its fourth significant digit, like memory in GB, reads as
  // 0.10065, not 1.0065e-1).
  const fixed = maxAbs < 1e6 && (decimals <= 4 || (maxAbs >= 1e-2 && decimals <= 8));
  if (fixed) return splits.map((v) => (Number.isFinite(v) ? v.toFixed(decimals) : ""));
  // Very large or very fine: scientific notation with the fewest digits that keep labels distinct.
  for (let digits = 0; digits <= 6; digits++) {
    const labels = splits.map((v) => (v === 0 ? "0" : v.toExponential(digits)));
    if (new Set(labels).size === new Set(splits).size) return labels;
  }
  return splits.map((v) => v.toExponential(6));
}

/**
 * Tick spacings of the step axis: whole steps only (1, 2, 5, 10, 20, 50, ...), so a run with a
 * few steps is not labelled 0.2, 0.4, ... between them.
 */
export const STEP_INCREMENTS: number[] = Array.from({ length: 16 }, (_, k) =>
  [1, 2, 5].map((m) => m * 10 ** k),
).flat();

/**
 * The unit of a metric's values from its DESIGN name (time/step_s → seconds), for the y axis
 * title; "" when the name does not say.
 */
export function unitOf(key: string): string {
  const leaf = key.slice(key.lastIndexOf("/") + 1);
  if (leaf === "tokens_per_s") return "tokens / s";
  if (leaf === "samples_per_s") return "samples / s";
  if (/_s$/.test(leaf)) return "seconds";
  if (/_ms(_p\d+)?$/.test(leaf)) return "milliseconds";
  if (/_gb$/.test(leaf)) return "GB";
  if (/(_frac|_util)$/.test(leaf)) return "fraction";
  if (/(^|_)kl(_|$)/.test(leaf) || leaf === "kl_ref") return "nats";
  if (key.startsWith("response_length/")) return "tokens";
  if (/^offpolicy\/staleness/.test(key)) return "weight versions";
  return "";
}

/** A checkpoint or a resume, drawn as a vertical line on every chart of the run. */
export interface StepMark {
  step: number;
  /** focus: the step a link points at (`?step=N`, as an alert's link). */
  kind: "checkpoint" | "resume" | "focus";
  label: string;
}

/** The step of a `?step=` parameter: a whole, non-negative number; null for none or anything else. */
export function focusStep(value: string | null): number | null {
  if (value === null || !/^\d{1,15}$/.test(value.trim())) return null;
  return Number(value.trim());
}

/** The marks with the linked-to step added (drawn last, over a checkpoint at the same step). */
export function withFocus(marks: readonly StepMark[], step: number | null): readonly StepMark[] {
  if (step === null) return marks;
  return [...marks, { step, kind: "focus", label: `step ${step}` }];
}

/** The run's checkpoints, and the steps its attempts resumed from (a resume from a checkpoint). */
export function stepMarks(
  checkpoints: readonly { id: number; step: number }[],
  attempts: readonly { number: number; resume_from: number | null }[],
): StepMark[] {
  const marks: StepMark[] = checkpoints.map((c) => ({ step: c.step, kind: "checkpoint", label: `checkpoint at step ${c.step}` }));
  for (const a of attempts) {
    const from = checkpoints.find((c) => c.id === a.resume_from);
    if (from) marks.push({ step: from.step, kind: "resume", label: `attempt ${a.number} resumed from step ${from.step}` });
  }
  return marks.sort((x, y) => x.step - y.step || x.kind.localeCompare(y.kind));
}

/** The whole steps a zoomed x scale shows, for asking the server for that range's buckets. */
export function stepRange(min: number | undefined, max: number | undefined): [number, number] | null {
  if (min == null || max == null || !Number.isFinite(min) || !Number.isFinite(max) || max < min) return null;
  return [Math.max(0, Math.floor(min)), Math.max(0, Math.ceil(max))];
}

/**
 * A per-step distribution drawn from a namespace's summary keys (DESIGN: reward/{min,p10,p50,p90,max},
 * response_length/{min,mean,max}): a centre line (p50, else mean) with the p10–p90 band inside the
 * min–max band.
 */
export interface Distribution {
  namespace: string;
  centre: string;
  inner: [string, string] | null;
  outer: [string, string] | null;
}

export function distributionsOf(keys: Iterable<string>): Distribution[] {
  const all = new Set(keys);
  const found: Distribution[] = [];
  for (const { namespace } of groupByNamespace(all)) {
    const key = (leaf: string) => `${namespace}/${leaf}`;
    const has = (leaf: string) => all.has(key(leaf));
    const centre = has("p50") ? key("p50") : has("mean") ? key("mean") : null;
    const inner: [string, string] | null = has("p10") && has("p90") ? [key("p10"), key("p90")] : null;
    const outer: [string, string] | null = has("min") && has("max") ? [key("min"), key("max")] : null;
    if (centre && (inner || outer)) found.push({ namespace, centre, inner, outer });
  }
  return found;
}

/**
 * uPlot columns [step, min, p10, centre, p90, max] over the union of the series' steps (null
 * where a series has no bucket there). A downsampled `min` key contributes its buckets' minimum,
 * a `max` key its buckets' maximum, the others their bucket means.
 */
export function distributionData(d: Distribution, series: Readonly<Record<string, Series>>): uPlot.AlignedData {
  const parts: [string | undefined, keyof Series][] = [
    [d.outer?.[0], "min"],
    [d.inner?.[0], "mean"],
    [d.centre, "mean"],
    [d.inner?.[1], "mean"],
    [d.outer?.[1], "max"],
  ];
  const steps = new Set<number>();
  for (const [key] of parts) for (const step of (key && series[key]?.step) || []) steps.add(step);
  const xs = [...steps].sort((a, b) => a - b);
  const columns = parts.map(([key, field]) => {
    const s = key ? series[key] : undefined;
    const at = new Map<number, number>();
    if (s) s.step.forEach((step, i) => at.set(step, (s[field] as number[])[i] ?? Number.NaN));
    return xs.map((step) => {
      const v = at.get(step);
      return v === undefined ? null : toPlottable(v);
    });
  });
  return [xs, ...columns];
}

// ------------------------------------------------------------ the layout a project keeps

/** Pinned charts and folded namespaces, remembered per project in this browser. */
export interface ChartLayout {
  pinned: string[];
  folded: string[];
}

const EMPTY_LAYOUT: ChartLayout = { pinned: [], folded: [] };

function layoutKey(projectId: number): string {
  return `barrel.chartLayout.${projectId}`;
}

export function loadLayout(projectId: number): ChartLayout {
  try {
    const stored = JSON.parse(globalThis.localStorage?.getItem(layoutKey(projectId)) ?? "null") as Partial<ChartLayout> | null;
    const strings = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);
    return stored ? { pinned: strings(stored.pinned), folded: strings(stored.folded) } : EMPTY_LAYOUT;
  } catch {
    return EMPTY_LAYOUT;
  }
}

export function saveLayout(projectId: number, layout: ChartLayout): void {
  globalThis.localStorage?.setItem(layoutKey(projectId), JSON.stringify(layout));
}

/** `list` with `item` added at the end, or taken out if present. */
export function toggled(list: readonly string[], item: string): string[] {
  return list.includes(item) ? list.filter((x) => x !== item) : [...list, item];
}
