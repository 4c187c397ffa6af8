import { QueryClient } from "@tanstack/react-query";
import { afterEach, describe, expect, it, vi } from "vitest";

import { liveBufferFor, type Series } from "../../api/metrics";
import type { SeriesTable } from "./align";
import {
  bucketsFor,
  compareKeys,
  fetchCompareSeries,
  mergeRunPoints,
  patchComparisons,
  pointsFor,
  queryBodies,
  type MetricsQueryRequest,
  type SeriesQuery,
} from "./api";

function series(step: number[], values: number[], key = "reward/mean"): Series {
  return { key, count: step.length, step, min: values, max: values, mean: values, last: values };
}

const query = (overrides: Partial<SeriesQuery> = {}): SeriesQuery => ({
  runs: [1, 2],
  keys: ["reward/mean"],
  maxPoints: 1000,
  range: null,
  ...overrides,
});

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("bulk metrics requests", () => {
  it("asks for fewer buckets per series when many series share one answer", () => {
    expect(bucketsFor(6, 3)).toBe(1000);
    expect(bucketsFor(100, 10)).toBe(300);
    expect(bucketsFor(1000, 100)).toBe(200);
  });

  it("is one request while the server's bounds allow, split by runs past them", () => {
    expect(queryBodies(query())).toEqual([{ runs: [1, 2], keys: ["reward/mean"], max_points: 1000 }]);
    const runs = Array.from({ length: 250 }, (_, i) => i + 1);
    expect(queryBodies(query({ runs })).map((b) => b.runs.length)).toEqual([100, 100, 50]);
    // 2000 series at most: 40 keys allow 50 runs per request.
    const keys = Array.from({ length: 40 }, (_, i) => `k${i}`);
    expect(queryBodies(query({ runs, keys })).map((b) => b.runs.length)).toEqual([50, 50, 50, 50, 50]);
    expect(queryBodies(query({ keys: [] }))).toEqual([]);
  });

  it("asks for a zoomed range in whole steps", () => {
    expect(queryBodies(query({ range: { min: 10.4, max: 99.2 } }))[0]).toMatchObject({ start: 10, end: 100 });
  });

  it("fetches, merges the chunks, and re-applies live points that came in meanwhile", async () => {
    const bodies: MetricsQueryRequest[] = [];
    vi.stubGlobal(
      "fetch",
      vi.fn(async (url: string, init?: RequestInit) => {
        // POSTs first prime the CSRF cookie with GET /session.
        if (!init?.body) return new Response("{}", { status: 200 });
        expect(url).toBe("/api/v1/metrics/query");
        const body = JSON.parse(String(init.body)) as MetricsQueryRequest;
        bodies.push(body);
        // A live point lands while the request is in flight.
        liveBufferFor(77).record([{ key: "reward/mean", step: 9, value: 0.9 }], performance.now());
        const series = body.runs.map((run) => ({ run, key: "reward/mean", count: 2, step: [0, 5], min: [0, 0.5], max: [0, 0.5], mean: [0, 0.5], last: [0, 0.5] }));
        return new Response(JSON.stringify({ series }), { status: 200, headers: { "Content-Type": "application/json" } });
      }),
    );
    const table = await fetchCompareSeries(query({ runs: [77, 78] }));
    expect(bodies).toEqual([{ runs: [77, 78], keys: ["reward/mean"], max_points: 1000 }]);
    expect(table.get("reward/mean")?.get(77)?.step).toEqual([0, 5, 9]);
    expect(table.get("reward/mean")?.get(78)?.step).toEqual([0, 5]);
  });
});

describe("live points in a comparison", () => {
  it("keeps the points of the comparison's runs, keys and range", () => {
    const points = [
      { key: "reward/mean", step: 5, value: 1 },
      { key: "other", step: 5, value: 1 },
      { key: "reward/mean", step: 500, value: 1 },
    ];
    expect(pointsFor(query(), 1, points)).toHaveLength(2);
    expect(pointsFor(query({ range: { min: 0, max: 100 } }), 1, points)).toEqual([points[0]]);
    expect(pointsFor(query(), 3, points)).toEqual([]);
  });

  it("merges a run's points into a copy, other keys keeping their identity", () => {
    const other = new Map([[1, series([0], [1], "other")]]);
    const table: SeriesTable = new Map([
      ["reward/mean", new Map([[1, series([0, 1], [0.1, 0.2])]])],
      ["other", other],
    ]);
    const next = mergeRunPoints(table, 1, [
      { key: "reward/mean", step: 2, value: 0.3 },
      { key: "new/key", step: 0, value: 5 },
    ]);
    expect(next).not.toBe(table);
    expect(next.get("reward/mean")?.get(1)?.mean).toEqual([0.1, 0.2, 0.3]);
    expect(table.get("reward/mean")?.get(1)?.mean).toEqual([0.1, 0.2]);
    expect(next.get("other")).toBe(other);
    expect(next.get("new/key")?.get(1)?.step).toEqual([0]);
    expect(mergeRunPoints(table, 1, [])).toBe(table);
  });

  it("patches every cached comparison that shows the run", () => {
    const client = new QueryClient();
    const shown = query();
    const zoomed = query({ range: { min: 0, max: 1 } });
    const elsewhere = query({ runs: [3] });
    const start = (): SeriesTable => new Map([["reward/mean", new Map([[1, series([0, 1], [0.1, 0.2])]])]]);
    client.setQueryData(compareKeys.seriesOf(shown), start());
    client.setQueryData(compareKeys.seriesOf(zoomed), start());
    client.setQueryData(compareKeys.seriesOf(elsewhere), start());
    patchComparisons(client, new Map([[1, [{ key: "reward/mean", step: 2, value: 0.3 }]]]));
    const steps = (q: SeriesQuery) => client.getQueryData<SeriesTable>(compareKeys.seriesOf(q))?.get("reward/mean")?.get(1)?.step;
    expect(steps(shown)).toEqual([0, 1, 2]);
    // Outside the zoomed range, and a comparison without run 1: untouched.
    expect(steps(zoomed)).toEqual([0, 1]);
    expect(steps(elsewhere)).toEqual([0, 1]);
  });

  it("patches several runs' points with one new table per comparison", () => {
    const client = new QueryClient();
    const both = query({ runs: [1, 2] });
    const other = new Map([[1, series([0], [1], "other")]]);
    const table: SeriesTable = new Map([
      ["reward/mean", new Map([[1, series([0], [0.1])], [2, series([0], [0.5])]])],
      ["other", other],
    ]);
    client.setQueryData(compareKeys.seriesOf(both), table);
    let notified = 0;
    const unsubscribe = client.getQueryCache().subscribe((event) => {
      if (event.type === "updated") notified += 1;
    });
    patchComparisons(
      client,
      new Map([
        [1, [{ key: "reward/mean", step: 1, value: 0.2 }]],
        [2, [{ key: "reward/mean", step: 1, value: 0.6 }]],
      ]),
    );
    unsubscribe();
    expect(notified).toBe(1);
    const next = client.getQueryData<SeriesTable>(compareKeys.seriesOf(both));
    expect(next?.get("reward/mean")?.get(1)?.mean).toEqual([0.1, 0.2]);
    expect(next?.get("reward/mean")?.get(2)?.mean).toEqual([0.5, 0.6]);
    expect(next?.get("other")).toBe(other);
  });
});
