import { describe, expect, it } from "vitest";

import {
  applyLatePoints,
  chunkKeys,
  emptySeries,
  LiveBuffer,
  mergeIntoAll,
  mergePoints,
  seriesFromWire,
  type Series,
} from "./metrics";

function raw(key: string, steps: number[], values: number[]): Series {
  return { key, count: steps.length, step: steps, min: values, max: values, mean: values, last: values };
}

describe("seriesFromWire", () => {
  it("parses non-finite strings in every column", () => {
    const series = seriesFromWire({
      key: "policy/loss",
      count: 2,
      step: [1, 2],
      min: [0.5, "NaN"],
      max: [0.5, "Infinity"],
      mean: [0.5, "NaN"],
      last: [0.5, "-Infinity"],
    });
    expect(series.mean[1]).toBeNaN();
    expect(series.max[1]).toBe(Number.POSITIVE_INFINITY);
    expect(series.last[1]).toBe(Number.NEGATIVE_INFINITY);
  });
});

describe("mergePoints", () => {
  it("appends points after the last step", () => {
    const merged = mergePoints(raw("k", [1, 2], [10, 20]), [
      { key: "k", step: 3, value: 30 },
      { key: "k", step: 4, value: 40 },
    ]);
    expect(merged.step).toEqual([1, 2, 3, 4]);
    expect(merged.mean).toEqual([10, 20, 30, 40]);
    expect(merged.min).toEqual([10, 20, 30, 40]);
    expect(merged.count).toBe(4);
  });

  it("keeps step order when points arrive out of order", () => {
    const merged = mergePoints(raw("k", [1, 5], [10, 50]), [
      { key: "k", step: 7, value: 70 },
      { key: "k", step: 3, value: 30 },
      { key: "k", step: 0, value: 0 },
    ]);
    expect(merged.step).toEqual([0, 1, 3, 5, 7]);
    expect(merged.last).toEqual([0, 10, 30, 50, 70]);
  });

  it("replaces an existing step instead of adding a second point", () => {
    const before: Series = { key: "k", count: 9, step: [1, 2], min: [0, 1], max: [4, 5], mean: [2, 3], last: [1, 4] };
    const merged = mergePoints(before, [{ key: "k", step: 2, value: 7 }]);
    expect(merged.step).toEqual([1, 2]);
    expect(merged.min).toEqual([0, 7]);
    expect(merged.max).toEqual([4, 7]);
    expect(merged.mean).toEqual([2, 7]);
    expect(merged.last).toEqual([1, 7]);
    expect(merged.count).toBe(9);
  });

  it("treats a repeated step within one batch as a correction", () => {
    const merged = mergePoints(emptySeries("k"), [
      { key: "k", step: 1, value: 1 },
      { key: "k", step: 1, value: 2 },
    ]);
    expect(merged.step).toEqual([1]);
    expect(merged.mean).toEqual([2]);
  });

  it("never mutates its input", () => {
    const before = raw("k", [1], [10]);
    const snapshot = structuredClone(before);
    const merged = mergePoints(before, [{ key: "k", step: 2, value: 20 }]);
    expect(before).toEqual(snapshot);
    expect(merged).not.toBe(before);
    expect(merged.step).not.toBe(before.step);
  });

  it("keeps NaN values as points", () => {
    const merged = mergePoints(emptySeries("k"), [{ key: "k", step: 1, value: Number.NaN }]);
    expect(merged.step).toEqual([1]);
    expect(merged.mean[0]).toBeNaN();
  });
});

describe("mergeIntoAll", () => {
  it("creates series for new keys and leaves untouched ones identical", () => {
    const a = raw("a/x", [1], [1]);
    const b = raw("b/y", [1], [2]);
    const merged = mergeIntoAll({ "a/x": a, "b/y": b }, [
      { key: "a/x", step: 2, value: 3 },
      { key: "c/z", step: 5, value: 9 },
    ]);
    expect(merged["b/y"]).toBe(b);
    expect(merged["a/x"]?.step).toEqual([1, 2]);
    expect(merged["c/z"]).toEqual(raw("c/z", [5], [9]));
  });

  it("returns the same object for an empty batch", () => {
    const all = { k: raw("k", [1], [1]) };
    expect(mergeIntoAll(all, [])).toBe(all);
  });
});

describe("applyLatePoints", () => {
  it("re-applies only points past the fetched end, and points of keys the fetch lacked", () => {
    const fetched = { k: raw("k", [10, 20], [1, 2]) };
    const merged = applyLatePoints(fetched, [
      { key: "k", step: 15, value: 99 }, // inside the fetched range: already in a bucket
      { key: "k", step: 20, value: 98 }, // the fetched last step itself
      { key: "k", step: 21, value: 3 },
      { key: "new", step: 1, value: 5 },
    ]);
    expect(merged.k?.step).toEqual([10, 20, 21]);
    expect(merged.k?.mean).toEqual([1, 2, 3]);
    expect(merged.new?.step).toEqual([1]);
  });
});

describe("LiveBuffer", () => {
  it("returns points recorded at or after a time", () => {
    const buffer = new LiveBuffer();
    buffer.record([{ key: "k", step: 1, value: 1 }], 100);
    buffer.record([{ key: "k", step: 2, value: 2 }], 200);
    expect(buffer.since(150).map((p) => p.step)).toEqual([2]);
    expect(buffer.since(0).map((p) => p.step)).toEqual([1, 2]);
  });

  it("forgets old and excess points", () => {
    const buffer = new LiveBuffer(1000, 3);
    buffer.record([{ key: "k", step: 1, value: 1 }], 0);
    buffer.record([{ key: "k", step: 2, value: 2 }], 5000);
    expect(buffer.since(0).map((p) => p.step)).toEqual([2]);
    buffer.record(
      [3, 4, 5].map((step) => ({ key: "k", step, value: step })),
      5001,
    );
    expect(buffer.since(0).map((p) => p.step)).toEqual([3, 4, 5]);
  });
});

describe("chunkKeys", () => {
  it("keeps every key, in order, within the length bound", () => {
    const keys = Array.from({ length: 200 }, (_, i) => `namespace_${i}/some_metric_name`);
    const chunks = chunkKeys(keys, 500);
    expect(chunks.flat()).toEqual(keys);
    for (const chunk of chunks) expect(chunk.map(encodeURIComponent).join(",").length).toBeLessThanOrEqual(500);
    expect(chunkKeys([])).toEqual([]);
  });
});
