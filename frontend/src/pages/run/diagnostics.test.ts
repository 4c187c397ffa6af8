import { describe, expect, it } from "vitest";

import { formatSeconds, formatShare, linePaths, stackedShares, stepSpans } from "./diagnostics";

describe("stackedShares", () => {
  it("stacks each bucket's staves as shares of its step time", () => {
    const bars = stackedShares({
      steps: [0, 10],
      step_s: [10, 10],
      staves: { train: [6, 8], trainer_wait: [4, 2], rollout: [null, null] },
    });
    expect(bars[0]?.parts).toEqual([
      { name: "train", share: 0.6, start: 0 },
      { name: "trainer_wait", share: 0.4, start: 0.6 },
    ]);
    expect(bars[1]?.parts.map((p) => p.share)).toEqual([0.8, 0.2]);
  });

  it("scales a bar whose overlapping staves pass the step time to its own total", () => {
    const bars = stackedShares({ steps: [0], step_s: [4], staves: { rollout: [4], train: [4] } });
    const total = bars[0]?.parts.reduce((s, p) => s + p.share, 0);
    expect(total).toBeCloseTo(1);
  });
});

describe("stepSpans", () => {
  it("joins consecutive steps", () => {
    expect(stepSpans([250, 120, 121, 121])).toEqual([
      { first: 120, last: 121 },
      { first: 250, last: 250 },
    ]);
  });
});

describe("formatting", () => {
  it("reads seconds and shares", () => {
    expect(formatSeconds(0.85)).toBe("850 ms");
    expect(formatSeconds(245)).toBe("4 min 05 s");
    expect(formatSeconds(null)).toBe("–");
    expect(formatShare(0.061)).toBe("6.1%");
  });
});

describe("linePaths", () => {
  it("splits a line at gaps and maps it into the box", () => {
    const paths = linePaths([0, 1, 2, 3], [0, 1, null, 1], 30, 10);
    expect(paths).toEqual(["0.0,10.0 10.0,0.0", "30.0,0.0"]);
  });
});
