import { describe, expect, it } from "vitest";

import { lineWidth, MANY_RUNS } from "./CompareChart";

describe("line widths", () => {
  it("draws many runs' lines 1 px wide, a few runs' and groups' wider", () => {
    expect(lineWidth("runs", MANY_RUNS)).toBeGreaterThan(1);
    expect(lineWidth("runs", MANY_RUNS + 1)).toBe(1);
    expect(lineWidth("runs", 100)).toBe(1);
    expect(lineWidth("groups", 100)).toBe(2);
  });
});
