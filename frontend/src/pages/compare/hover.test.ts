import { describe, expect, it, vi } from "vitest";

import { definedRanges, hoverValues, HoverStore } from "./hover";

describe("hover values", () => {
  const data: [number[], ...(number | null | undefined)[][]] = [
    [0, 10, 20, 30],
    [1, undefined, 3, undefined],
    [undefined, 5, null, 7],
  ];

  it("finds where each column has values", () => {
    expect(definedRanges(data)).toEqual([
      [0, 2],
      [1, 3],
    ]);
  });

  it("shows each run's nearest value, but nothing past the steps it spans", () => {
    const ranges = definedRanges(data);
    // Cursor at index 1: run 0 has no point there; uPlot's idxs point it to its nearest (0).
    expect(hoverValues(data, ranges, 1, [1, 0, 1], 1)).toEqual([1, 5]);
    // Index 3 is past run 0's last point.
    expect(hoverValues(data, ranges, 3, [3, 2, 3], 1)).toEqual([undefined, 7]);
    expect(hoverValues(data, ranges, 2, [2, 2, 2], 1)).toEqual([3, null]);
  });

  it("reads a group's mean, every third series", () => {
    const grouped: [number[], ...number[][]] = [[0], [1], [0], [2], [5], [4], [6]];
    expect(hoverValues(grouped, definedRanges(grouped), 0, [0, 0, 0, 0, 0, 0, 0], 3)).toEqual([1, 5]);
  });

  it("tells subscribers, and stays quiet when nothing changes", () => {
    const store = new HoverStore();
    const listener = vi.fn();
    const unsubscribe = store.subscribe(listener);
    store.set(null);
    expect(listener).not.toHaveBeenCalled();
    store.set({ metricKey: "k", step: 3, values: [1] });
    expect(store.get()?.step).toBe(3);
    expect(listener).toHaveBeenCalledTimes(1);
    unsubscribe();
    store.set(null);
    expect(listener).toHaveBeenCalledTimes(1);
  });
});
