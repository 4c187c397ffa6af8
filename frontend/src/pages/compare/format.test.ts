import { describe, expect, it } from "vitest";

import { formatLogTick } from "./format";

describe("log axis labels", () => {
  it("writes far decades short, and everything else as a metric value", () => {
    expect(formatLogTick(1e-5)).toBe("1e-5");
    expect(formatLogTick(0.00001)).toBe("1e-5");
    expect(formatLogTick(1e7)).toBe("1e7");
    expect(formatLogTick(0.001)).toBe("0.001");
    expect(formatLogTick(100)).toBe("100");
    expect(formatLogTick(3e-5)).toBe("3.000e-5");
    expect(formatLogTick(null)).toBe("");
  });
});
