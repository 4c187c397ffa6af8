import type uPlot from "uplot";

import { toPlottable } from "../../api/nonfinite";
import type { Series } from "../../api/metrics";

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

/** What the run page's charts show: smoothing weight and a log y axis. */
export interface ChartView {
  smoothing: number;
  logScale: boolean;
}

export const DEFAULT_VIEW: ChartView = { smoothing: 0, logScale: false };

/**
 * uPlot columns [step, mean, min, max, smoothed mean]. NaN and ±Infinity become null, which
 * uPlot draws as a gap (a diverged loss shows as a hole, not a crash); on a log axis, so do
 * values at or below zero.
 */
export function toUplotData(series: Series, view: ChartView = DEFAULT_VIEW): uPlot.AlignedData {
  const plottable = view.logScale ? (v: number) => (v > 0 ? toPlottable(v) : null) : toPlottable;
  const smoothed = smoothEma(series.mean, view.smoothing).map((v) => (v === null ? null : plottable(v)));
  return [series.step, series.mean.map(plottable), series.min.map(plottable), series.max.map(plottable), smoothed];
}

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
