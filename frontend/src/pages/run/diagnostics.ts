import type { components } from "../../api/schema.gen";

/** GET /api/v1/runs/{id}/diagnosis. */
export type Diagnosis = components["schemas"]["Diagnosis"];
export type Stave = components["schemas"]["Stave"];
export type BarrelChart = components["schemas"]["BarrelChart"];
export type Scorecard = components["schemas"]["Scorecard"];

/** A float of the schema: JSON numbers, and non-finite ones as strings. */
export type Num = number | "NaN" | "Infinity" | "-Infinity";

/** A schema float as a finite number, or null. */
export function toNum(x: Num | null | undefined): number | null {
  if (typeof x !== "number" || !Number.isFinite(x)) return null;
  return x;
}

/** The staves in stacking order, each with its colour: producer, trainer, then idle. */
export const STAVE_COLORS: Record<string, string> = {
  rollout: "#4e79a7",
  reward: "#f28e2b",
  sandbox: "#edc948",
  old_logprob: "#76b7b2",
  reference: "#59a14f",
  train: "#e15759",
  weight_sync: "#b07aa1",
  checkpoint: "#9c755f",
  trainer_wait: "#bab0ac",
  rollout_wait: "#d3d3d3",
};

export interface StackedBar {
  step: number;
  /** Each stave's share of the bucket's step time, stacking order, with its start offset. */
  parts: { name: string; share: number; start: number }[];
}

/**
 * Per bucket of the barrel chart, the staves' shares of the step time,
 * stacked. The trainer-path staves and the idle ones add up to about the step;
 * the producer staves run beside them, so a bar is scaled to its own total
 * when it passes 1 (the shares then say how the time splits, not the wall).
 */
export function stackedShares(chart: BarrelChart, order: string[] = Object.keys(STAVE_COLORS)): StackedBar[] {
  return chart.steps.map((step, i) => {
    const stepS = toNum(chart.step_s[i]);
    const seconds = order
      .filter((name) => chart.staves[name] !== undefined)
      .map((name) => ({ name, s: toNum(chart.staves[name]?.[i]) ?? 0 }))
      .filter((x) => x.s > 0);
    const total = seconds.reduce((sum, x) => sum + x.s, 0);
    const scale = Math.max(total, stepS ?? 0) || 1;
    let start = 0;
    const parts = seconds.map(({ name, s }) => {
      const part = { name, share: s / scale, start };
      start += part.share;
      return part;
    });
    return { step, parts };
  });
}

/** Seconds as people read them: 850 ms, 12.3 s, 4 min 05 s, 2 h 10 min. */
export function formatSeconds(value: Num | null | undefined): string {
  const s = toNum(value);
  if (s === null) return "–";
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s.toFixed(1)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(Math.round(s % 60)).padStart(2, "0")} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

export function formatShare(value: Num | null | undefined): string {
  const x = toNum(value);
  return x === null ? "–" : `${(x * 100).toFixed(1)}%`;
}

export function formatNumber(value: Num | null | undefined): string {
  const x = toNum(value);
  if (x === null) return "–";
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return x.toExponential(2);
  return x.toLocaleString("en-US", { maximumFractionDigits: a < 1 ? 4 : 2 });
}

/** Consecutive flagged steps as spans: [120, 121, 250] → "120–121, 250". */
export function stepSpans(steps: number[]): { first: number; last: number }[] {
  const sorted = [...new Set(steps)].sort((a, b) => a - b);
  const spans: { first: number; last: number }[] = [];
  for (const step of sorted) {
    const last = spans[spans.length - 1];
    if (last && step === last.last + 1) last.last = step;
    else spans.push({ first: step, last: step });
  }
  return spans;
}

/** An SVG polyline's points for values over steps, in a width × height box (log scale optional); gaps split lines. */
export function linePaths(
  steps: number[],
  values: (Num | null)[],
  width: number,
  height: number,
  opts: { log?: boolean; min?: number; max?: number } = {},
): string[] {
  const f = (v: number) => (opts.log ? Math.log10(Math.max(v, 1e-12)) : v);
  const known = values.map(toNum).filter((v): v is number => v !== null).map(f);
  if (known.length === 0 || steps.length === 0) return [];
  const lo = opts.min !== undefined ? f(opts.min) : Math.min(...known);
  const hi = opts.max !== undefined ? f(opts.max) : Math.max(...known);
  const span = hi - lo || 1;
  const x0 = steps[0] ?? 0;
  const xSpan = (steps[steps.length - 1] ?? 0) - x0 || 1;
  const paths: string[] = [];
  let current: string[] = [];
  steps.forEach((step, i) => {
    const v = toNum(values[i]);
    if (v === null) {
      if (current.length) paths.push(current.join(" "));
      current = [];
      return;
    }
    const x = ((step - x0) / xSpan) * width;
    const y = height - ((f(v) - lo) / span) * height;
    current.push(`${x.toFixed(1)},${y.toFixed(1)}`);
  });
  if (current.length) paths.push(current.join(" "));
  return paths;
}
