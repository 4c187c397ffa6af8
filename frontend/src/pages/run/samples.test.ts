import { describe, expect, it } from "vitest";

import type { Sample } from "../../api/types";
import { formatReward, samplesByStep } from "./samples";

function sample(id: number, step: number, reward: number | null = 1): Sample {
  return {
    id,
    step,
    prompt: "1+2=",
    response: "3",
    reward,
    prompt_tokens: 5,
    response_tokens: 2,
    weight_version: step,
    extra: {},
    created_at: "2026-11-30T10:00:00Z",
  };
}

describe("samplesByStep", () => {
  it("groups by step, newest step first, keeping the job's order within a step", () => {
    const grouped = samplesByStep([sample(3, 1), sample(1, 0), sample(5, 2), sample(4, 1)]);
    expect(grouped.map((g) => g.step)).toEqual([2, 1, 0]);
    expect(grouped[1]?.samples.map((s) => s.id)).toEqual([3, 4]);
  });

  it("returns nothing for no samples", () => {
    expect(samplesByStep([])).toEqual([]);
  });
});

describe("formatReward", () => {
  it("shows integers plainly, fractions to three places, and non-finite strings as sent", () => {
    expect(formatReward(1)).toBe("1");
    expect(formatReward(0.12345)).toBe("0.123");
    expect(formatReward("NaN")).toBe("NaN");
    expect(formatReward(null)).toBe("–");
  });
});
