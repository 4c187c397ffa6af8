import { describe, expect, it } from "vitest";

import type { Series } from "../../api/metrics";
import { smoothEma } from "../run/charts";
import { alignKey, chartData, commonGrid, groupBand, plottedValues, tableFromWire, type AlignedKey } from "./align";
import type { RunMetricSeriesWire } from "./api";

function series(step: number[], mean: number[], key = "reward/mean"): Series {
  return { key, count: step.length, step, min: mean, max: mean, mean, last: mean };
}

const RAW = { smoothing: 0, logScale: false };

describe("tableFromWire", () => {
  it("files the bulk answer by key, then run, with non-finite strings parsed", () => {
    const wire: RunMetricSeriesWire[] = [
      { run: 1, key: "a", count: 2, step: [0, 1], min: [1, "NaN"], max: [1, "NaN"], mean: [1, "NaN"], last: [1, "NaN"] },
      { run: 2, key: "a", count: 1, step: [5], min: ["-Infinity"], max: [2], mean: [2], last: ["Infinity"] },
      { run: 2, key: "b", count: 0, step: [], min: [], max: [], mean: [], last: [] },
    ];
    const table = tableFromWire(wire);
    expect([...table.keys()]).toEqual(["a", "b"]);
    expect(table.get("a")?.get(1)?.mean).toEqual([1, Number.NaN]);
    expect(table.get("a")?.get(2)?.min).toEqual([Number.NEGATIVE_INFINITY]);
    expect(table.get("a")?.get(2)?.last).toEqual([Number.POSITIVE_INFINITY]);
    expect(table.get("b")?.get(2)?.step).toEqual([]);
  });
});

describe("alignKey", () => {
  it("puts every run on the union of their steps, undefined where a run reports nothing", () => {
    const aligned = alignKey([series([0, 10, 20], [1, 2, 3]), series([5, 10], [7, 8]), undefined], RAW);
    expect([...aligned.steps]).toEqual([0, 5, 10, 20]);
    expect(aligned.columns).toEqual([
      [1, undefined, 2, 3],
      [undefined, 7, 8, undefined],
      [undefined, undefined, undefined, undefined],
    ]);
    expect([...aligned.first]).toEqual([0, 1, -1]);
    expect([...aligned.last]).toEqual([3, 2, -1]);
    expect(aligned.snapped).toBe(false);
    expect(aligned.steps).toBeInstanceOf(Float64Array);
  });

  it("draws a non-finite value as a gap (null), not as a skipped step", () => {
    const aligned = alignKey([series([0, 1, 2], [1, Number.NaN, Number.POSITIVE_INFINITY]), series([1], [4])], RAW);
    expect(aligned.columns[0]).toEqual([1, null, null]);
  });

  it("smooths each run on its own points, whatever the other runs' steps", () => {
    const a = series([0, 2, 4, 6], [0, 1, 1, 1]);
    const alone = alignKey([a], { smoothing: 0.6, logScale: false });
    const together = alignKey([a, series([1, 3, 5], [9, 9, 9])], { smoothing: 0.6, logScale: false });
    const expected = smoothEma([0, 1, 1, 1], 0.6);
    expect(alone.columns[0]).toEqual(expected);
    expect(together.columns[0]?.filter((v) => v !== undefined)).toEqual(expected);
  });

  it("drops values a log axis cannot place", () => {
    expect(plottedValues(series([0, 1, 2], [0, -1, 2]), { smoothing: 0, logScale: true })).toEqual([null, null, 2]);
  });

  it("puts steps that never line up on a grid, averaging points that share a grid step", () => {
    // 11 distinct steps, at most 3 allowed: a grid of width 5 from 0 (0, 5, 10).
    const aligned = alignKey([series([0, 2, 4, 6, 8, 10], [0, 2, 4, 6, 8, 10]), series([1, 3, 5, 7, 9], [1, 3, 5, 7, 9])], RAW, { maxSteps: 3 });
    expect(aligned.snapped).toBe(true);
    expect([...aligned.steps]).toEqual([0, 5, 10]);
    // Run 0: 0 → 0; 2, 4 → 5; 6, 8, 10 → 10.
    expect(aligned.columns[0]).toEqual([0, 3, 8]);
    // Run 1: 1, 3, 5 → 5; 7, 9 → 10.
    expect(aligned.columns[1]).toEqual([undefined, 3, 8]);
  });

  it("puts a group's runs on the grid of its coarsest buckets, so that its mean does not zigzag", () => {
    // The server buckets a full run by 5 steps (reported at 4, 9, 14, …) and a run cut short by 4
    // (3, 7, 11): on the union of their steps each would be left out of every other mean.
    const full = series([4, 9, 14, 19], [1, 1, 1, 1]);
    const short = series([3, 7, 11], [3, 3, 3]);
    const grid = commonGrid([full, short, undefined]);
    expect(grid).toEqual({ origin: 4, width: 5 });
    const aligned = alignKey([full, short], RAW, { grid });
    expect([...aligned.steps]).toEqual([4, 9, 14, 19]);
    expect(aligned.columns).toEqual([
      [1, 1, 1, 1],
      [3, 3, 3, undefined],
    ]);
    expect(aligned.snapped).toBe(false);
    expect(groupBand(aligned, [0, 1], "minmax").mean).toEqual([2, 2, 2, 1]);
    // Runs logging every step need no grid.
    expect(commonGrid([series([0, 1, 2], [0, 0, 0])])).toEqual({ origin: 0, width: 1 });
    expect(commonGrid([series([5], [0]), undefined])).toBeNull();
  });

  it("aligns 100 runs of 1000 buckets at different steps on their union", () => {
    // (How fast is benchmarks/compare_page's to say: a test on a shared machine does not time.)
    const runs = Array.from({ length: 100 }, (_, r) => {
      // Runs of different lengths: their buckets sit at different steps.
      const step = Array.from({ length: 1000 }, (_, i) => i * (r % 3 === 0 ? 2 : 3));
      return series(step, step.map((s) => Math.sin(s / 50) + r / 100));
    });
    const aligned = alignKey(runs, { smoothing: 0, logScale: false });
    const union = new Set(runs.flatMap((run) => [...run.step]));
    expect(aligned.snapped).toBe(false);
    expect(aligned.steps.length).toBe(union.size);
    expect(aligned.columns).toHaveLength(100);
    const at = aligned.steps.indexOf(2997); // the longer runs' last bucket; the shorter end at 1998
    expect(aligned.columns[1]?.[at]).toBeCloseTo(Math.sin(2997 / 50) + 0.01);
    expect(aligned.last[0]).toBe(aligned.steps.indexOf(1998));
    const data = chartData(aligned, { kind: "groups", groups: [[0, 1, 2], [3, 4, 5]], band: "stderr" });
    expect(data[0]).toHaveLength(union.size);
  });
});

function aligned(columns: (number | null | undefined)[][]): AlignedKey {
  const n = columns[0]?.length ?? 0;
  return {
    steps: Float64Array.from({ length: n }, (_, i) => i),
    columns,
    first: new Int32Array(columns.length),
    last: new Int32Array(columns.length),
    snapped: false,
  };
}

describe("groupBand", () => {
  const data = aligned([
    [1, 2, undefined, null, undefined],
    [3, undefined, 5, null, undefined],
    [5, 4, 6, 1, undefined],
  ]);

  it("takes the mean of the runs reporting each step, with their min–max", () => {
    const band = groupBand(data, [0, 1, 2], "minmax");
    expect(band.mean).toEqual([3, 3, 5.5, 1, undefined]);
    expect(band.lo).toEqual([1, 2, 5, 1, undefined]);
    expect(band.hi).toEqual([5, 4, 6, 1, undefined]);
  });

  it("is a gap where every reporting run has one, undefined where none reports", () => {
    const band = groupBand(data, [0, 1], "minmax");
    expect(band.mean).toEqual([2, 2, 5, null, undefined]);
    expect(band.lo[3]).toBeNull();
  });

  it("gives mean ± standard error, and no band under two runs", () => {
    const band = groupBand(aligned([[1, 1], [3, undefined]]), [0, 1], "stderr");
    // mean 2, sd √2, se 1.
    expect(band.mean).toEqual([2, 1]);
    expect(band.lo[0]).toBeCloseTo(1);
    expect(band.hi[0]).toBeCloseTo(3);
    expect(band.lo[1]).toBeUndefined();
    expect(band.hi[1]).toBeUndefined();
  });
});

describe("chartData", () => {
  const key = alignKey([series([0, 1], [1, 2]), series([1], [4]), series([0, 1], [3, 6])], RAW);

  it("is [steps, run…] for runs", () => {
    const data = chartData(key, { kind: "runs" });
    expect(data).toHaveLength(4);
    expect(data[0]).toBe(key.steps);
    expect(data[2]).toEqual([undefined, 4]);
  });

  it("is [steps, mean, low, high, …] per group", () => {
    const data = chartData(key, { kind: "groups", groups: [[0, 2], [1]], band: "minmax" });
    expect(data).toHaveLength(7);
    expect(data.slice(1, 4)).toEqual([
      [2, 4],
      [1, 2],
      [3, 6],
    ]);
    expect(data[4]).toEqual([undefined, 4]);
  });
});
