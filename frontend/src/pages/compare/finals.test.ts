import { describe, expect, it } from "vitest";

import type { Series } from "../../api/metrics";
import type { SeriesTable } from "./align";
import { difference, finalRows, finalValue, formatSigned, sortRows, type FinalEntry } from "./finals";

function series(last: number[]): Series {
  const step = last.map((_, i) => i);
  return { key: "k", count: last.length, step, min: last, max: last, mean: last, last };
}

const table: SeriesTable = new Map([
  [
    "reward/mean",
    new Map([
      [1, series([0.1, 0.5])],
      [2, series([0.2, 0.7])],
      [3, series([0.3, Number.NaN])],
      [4, series([0.9])],
    ]),
  ],
  ["eval/acc", new Map([[1, series([0.4])]])],
]);

const runs: FinalEntry[] = [1, 2, 3, 4].map((id) => ({ id: `r:${id}`, label: `run ${id}`, runIds: [id], isGroup: false }));

describe("final values", () => {
  it("takes a series' last value", () => {
    expect(finalValue(series([1, 2, 3]))).toBe(3);
    expect(finalValue(series([]))).toBeUndefined();
    expect(finalValue(undefined)).toBeUndefined();
  });

  it("gives each run its last value per key, NaN kept, missing as null", () => {
    const rows = finalRows(runs, table, ["reward/mean", "eval/acc"]);
    expect(rows.map((r) => r.cells["reward/mean"]?.value)).toEqual([0.5, 0.7, Number.NaN, 0.9]);
    expect(rows[1]?.cells["eval/acc"]).toEqual({ value: null, sd: null, n: 0, missing: 1 });
  });

  it("gives a group the mean ± sd of its runs' finite last values", () => {
    const groups: FinalEntry[] = [
      { id: "g:a", label: "lr=1", runIds: [1, 2, 3], isGroup: true },
      { id: "g:b", label: "lr=2", runIds: [4], isGroup: true },
    ];
    const [a, b] = finalRows(groups, table, ["reward/mean"]);
    expect(a?.cells["reward/mean"]?.value).toBeCloseTo(0.6);
    expect(a?.cells["reward/mean"]?.sd).toBeCloseTo(Math.sqrt(0.02));
    expect(a?.cells["reward/mean"]).toMatchObject({ n: 2, missing: 1 });
    expect(a?.runCount).toBe(3);
    expect(b?.cells["reward/mean"]).toEqual({ value: 0.9, sd: null, n: 1, missing: 0 });
  });

  it("differs from a baseline in absolute terms and in percent", () => {
    expect(difference(0.6, 0.5)?.absolute).toBeCloseTo(0.1);
    expect(difference(0.6, 0.5)?.percent).toBeCloseTo(20);
    expect(difference(-1.5, -1)?.percent).toBeCloseTo(-50);
    expect(difference(1, 0)).toEqual({ absolute: 1, percent: null });
    expect(difference(Number.NaN, 1)).toBeNull();
    expect(difference(1, null)).toBeNull();
  });

  it("sorts by a key, rows without a finite value last either way", () => {
    const rows = finalRows(runs, table, ["reward/mean"]);
    const ids = (descending: boolean) => sortRows(rows, { column: "reward/mean", descending }).map((r) => r.id);
    expect(ids(false)).toEqual(["r:1", "r:2", "r:4", "r:3"]);
    expect(ids(true)).toEqual(["r:4", "r:2", "r:1", "r:3"]);
    expect(sortRows(rows, { column: null, descending: true }).map((r) => r.id)).toEqual(["r:4", "r:3", "r:2", "r:1"]);
  });

  it("signs differences", () => {
    expect(formatSigned(0.5, String)).toBe("+0.5");
    expect(formatSigned(-0.5, String)).toBe("−0.5");
    expect(formatSigned(0, String)).toBe("±0");
  });
});
