import type { Sample } from "../../api/types";

export interface StepSamples {
  step: number;
  samples: Sample[];
}

/** Samples grouped by step, newest step first, in the order the job kept them. */
export function samplesByStep(samples: readonly Sample[]): StepSamples[] {
  const byStep = new Map<number, Sample[]>();
  for (const s of samples) {
    const rows = byStep.get(s.step);
    if (rows) rows.push(s);
    else byStep.set(s.step, [s]);
  }
  return [...byStep.entries()]
    .sort(([a], [b]) => b - a)
    .map(([step, rows]) => ({ step, samples: [...rows].sort((x, y) => x.id - y.id) }));
}

/** Rewards as stored: numbers, "NaN"/"Infinity" strings for non-finite ones, or missing. */
export function formatReward(value: unknown): string {
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : value.toFixed(3);
  if (typeof value === "string") return value;
  return "–";
}
