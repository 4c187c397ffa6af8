import { describe, expect, it } from "vitest";

import { formatMetricValue, parseWireFloat, parseWireFloats, toPlottable } from "./nonfinite";

describe("parseWireFloat", () => {
  it("passes numbers through", () => {
    expect(parseWireFloat(0.5)).toBe(0.5);
    expect(parseWireFloat(-3)).toBe(-3);
  });

  it("turns the contract's strings into non-finite numbers", () => {
    expect(parseWireFloat("NaN")).toBeNaN();
    expect(parseWireFloat("Infinity")).toBe(Number.POSITIVE_INFINITY);
    expect(parseWireFloat("-Infinity")).toBe(Number.NEGATIVE_INFINITY);
  });

  it("reads other spellings and numeric strings leniently", () => {
    expect(parseWireFloat("inf")).toBe(Number.POSITIVE_INFINITY);
    expect(parseWireFloat("-inf")).toBe(Number.NEGATIVE_INFINITY);
    expect(parseWireFloat("1e3")).toBe(1000);
  });

  it("makes null, empty and garbage a gap rather than throwing", () => {
    expect(parseWireFloat(null)).toBeNaN();
    expect(parseWireFloat(undefined)).toBeNaN();
    expect(parseWireFloat("")).toBeNaN();
    expect(parseWireFloat("banana")).toBeNaN();
  });

  it("parses whole columns", () => {
    expect(parseWireFloats([1, "NaN", "Infinity"])).toEqual([1, Number.NaN, Number.POSITIVE_INFINITY]);
  });
});

describe("toPlottable", () => {
  it("keeps finite values and turns every non-finite one into a uPlot gap", () => {
    expect(toPlottable(2)).toBe(2);
    expect(toPlottable(Number.NaN)).toBeNull();
    expect(toPlottable(Number.POSITIVE_INFINITY)).toBeNull();
    expect(toPlottable(Number.NEGATIVE_INFINITY)).toBeNull();
  });
});

describe("formatMetricValue", () => {
  it("names non-finite values and keeps finite ones short", () => {
    expect(formatMetricValue(Number.NaN)).toBe("NaN");
    expect(formatMetricValue(Number.POSITIVE_INFINITY)).toBe("+Inf");
    expect(formatMetricValue(Number.NEGATIVE_INFINITY)).toBe("−Inf");
    expect(formatMetricValue(undefined)).toBe("–");
    expect(formatMetricValue(0.123456789)).toBe("0.12346");
    expect(formatMetricValue(1.5e-7)).toBe("1.500e-7");
    expect(formatMetricValue(0)).toBe("0");
  });
});
