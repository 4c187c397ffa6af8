import type uPlot from "uplot";

import type { Series, SeriesByKey } from "../../api/metrics";
import { parseWireFloat, toPlottable } from "../../api/nonfinite";
import type { CheckpointScore, WireFloat } from "../../api/types";

/** A score from the API as a number to draw, or null (none, or not finite). */
export function finite(value: WireFloat | null | undefined): number | null {
  return value == null ? null : toPlottable(parseWireFloat(value));
}

/** The run's proxy reward, as DESIGN names it. */
export const PROXY_REWARD_KEY = "reward/mean";

/**
 * The held-out eval series beside it: the recipe reports `eval/held_out/reward_mean`; any
 * `eval/<set>/reward_mean` will do for runs that name their sets otherwise (held_out first).
 */
export function heldOutKey(keys: Iterable<string>): string | null {
  const found = [...keys].filter((k) => /^eval\/[^/]+\/reward_mean$/.test(k)).sort();
  return found.find((k) => k === "eval/held_out/reward_mean") ?? found[0] ?? null;
}

/**
 * uPlot columns on one step axis: [step, human score, ci low, ci high, proxy reward, held-out].
 * The human score sits only at checkpoint steps; the metric series only at their own steps:
 * every other cell is null (a gap the score line spans and the reward lines do not need).
 */
export function humanChartData(
  checkpoints: CheckpointScore[],
  reward: Series | undefined,
  heldOut: Series | undefined,
): uPlot.AlignedData {
  const steps = new Set<number>();
  for (const c of checkpoints) steps.add(c.step);
  for (const s of [reward, heldOut]) for (const step of s?.step ?? []) steps.add(step);
  const x = [...steps].sort((a, b) => a - b);
  const column = (pairs: [number, number | null][]): (number | null)[] => {
    const at = new Map(pairs);
    return x.map((step) => at.get(step) ?? null);
  };
  const scored = checkpoints.filter((c) => finite(c.score) !== null);
  const ofSeries = (s: Series | undefined) =>
    column((s?.step ?? []).map((step, i) => [step, toPlottable(s?.mean[i] ?? Number.NaN)]));
  return [
    x,
    column(scored.map((c) => [c.step, finite(c.score)])),
    column(scored.map((c) => [c.step, finite(c.ci_low)])),
    column(scored.map((c) => [c.step, finite(c.ci_high)])),
    ofSeries(reward),
    ofSeries(heldOut),
  ];
}

/** The series a human chart needs from the run's metrics. */
export function humanChartSeries(series: SeriesByKey | undefined): { reward?: Series; heldOut?: Series; heldOutKey: string | null } {
  if (!series) return { heldOutKey: null };
  const key = heldOutKey(Object.keys(series));
  return { reward: series[PROXY_REWARD_KEY], heldOut: key ? series[key] : undefined, heldOutKey: key };
}
