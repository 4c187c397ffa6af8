import { describe, expect, it } from "vitest";

import { alphaReading, formatScore, formatWinRate, generationProgress, lengthPreference, winRateColor } from "./format";

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

describe("alphaReading", () => {
  it("reads alpha on Krippendorff's thresholds", () => {
    expect(alphaReading(0.85)).toBe("α = 0.85: reliable (≥ 0.8)");
    expect(alphaReading(0.7)).toMatch(/^α = 0.70: tentative \(≥ 0.667\)/);
    expect(alphaReading(0.667)).toMatch(/tentative/);
    expect(alphaReading(0.3)).toMatch(/^α = 0.30: unreliable/);
    expect(alphaReading(null)).toMatch(/^not measured yet/);
  });
});

describe("win rates", () => {
  it("shows a share as a percentage and colours it from red through neutral to green", () => {
    expect(formatWinRate(0.604)).toBe("60 %");
    expect(formatWinRate(null)).toBe("–");
    expect(winRateColor(null)).toBeUndefined();
    expect(winRateColor(0.5)).toBe("hsl(130 60% 97%)");
    expect(winRateColor(1)).toBe("hsl(130 60% 42%)");
    expect(winRateColor(0)).toBe("hsl(0 60% 42%)");
  });
});

describe("lengthPreference", () => {
  it("says which way the voters lean, in Arena points", () => {
    expect(lengthPreference(0.05)).toBe(
      "voters favour longer responses (β = 0.050: a typical length difference is worth 20 Arena points)",
    );
    expect(lengthPreference(-0.1)).toMatch(/shorter responses .*40 Arena points/);
    expect(lengthPreference(0.001)).toBe("none measurable");
    expect(lengthPreference(null)).toBe("no votes yet");
  });
});
