import { describe, expect, it } from "vitest";

import type { Series } from "../../api/metrics";
import type { CheckpointScore } from "../../api/types";
import { finite, heldOutKey, humanChartData } from "./human";

function series(key: string, step: number[], mean: number[]): Series {
  return { key, count: step.length, step, min: mean, max: mean, mean, last: mean };
}

function scored(step: number, score: number | "NaN" | null): CheckpointScore {
  const interval = typeof score === "number" ? [score - 10, score + 10] : [null, null];
  return {
    checkpoint: step,
    step,
    label: `c${step}`,
    score,
    ci_low: interval[0] ?? null,
    ci_high: interval[1] ?? null,
    rank: null,
    battles: 0,
    proxy_reward: null,
  };
}

describe("the human chart's data", () => {
  it("picks the held-out eval's reward, else any eval set's", () => {
    expect(heldOutKey(["eval/rl_prompts/reward_mean", "eval/held_out/reward_mean", "reward/mean"])).toBe(
      "eval/held_out/reward_mean",
    );
    expect(heldOutKey(["eval/b/reward_mean", "eval/a/reward_mean", "eval/a/correct"])).toBe("eval/a/reward_mean");
    expect(heldOutKey(["reward/mean", "eval/a/correct"])).toBeNull();
  });

  it("puts scores, intervals and both rewards on one step axis, null where a series has no point", () => {
    const reward = series("reward/mean", [0, 50, 100], [0.1, 0.2, Number.NaN]);
    const heldOut = series("eval/held_out/reward_mean", [100], [0.3]);
    const data = humanChartData([scored(100, 1010), scored(60, null), scored(150, 990)], reward, heldOut);
    expect(data).toEqual([
      [0, 50, 60, 100, 150],
      [null, null, null, 1010, 990], // a checkpoint without votes is not drawn
      [null, null, null, 1000, 980],
      [null, null, null, 1020, 1000],
      [0.1, 0.2, null, null, null], // a NaN reward is a gap
      [null, null, null, 0.3, null],
    ]);
  });

  it("draws nothing of a score that is not a finite number", () => {
    expect(finite("NaN")).toBeNull();
    expect(finite(null)).toBeNull();
    expect(finite(1012.5)).toBe(1012.5);
    expect(humanChartData([scored(5, "NaN")], undefined, undefined)).toEqual([[5], [null], [null], [null], [null], [null]]);
  });
});
