import { describe, expect, it } from "vitest";

import { formatScore, generationProgress } from "./format";

describe("formatScore", () => {
  it("rounds the score and its interval", () => {
    expect(formatScore({ score: 1012.4, ci_low: 987.2, ci_high: 1040.5 })).toBe("1012 [987, 1041]");
  });
  it("shows a missing score or interval as such", () => {
    expect(formatScore({ score: null, ci_low: null, ci_high: null })).toBe("–");
    expect(formatScore({ score: 1000, ci_low: null, ci_high: null })).toBe("1000");
    expect(formatScore({ score: 1000, ci_low: "-Infinity", ci_high: "Infinity" })).toBe("1000 [-Infinity, Infinity]");
  });
});

describe("generationProgress", () => {
  it("counts responses against the expected number", () => {
    const progress = { generations: 0, expected: 0, battles: 0, votes: 0, prompts: 0, prompts_covered: 0 };
    expect(generationProgress(progress)).toBe("0 / 0 responses (0 %)");
    expect(generationProgress({ ...progress, generations: 1, expected: 3 })).toBe("1 / 3 responses (33 %)");
  });
});
