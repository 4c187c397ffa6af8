// @vitest-environment jsdom
import { afterEach, describe, expect, it } from "vitest";

import {
  chosenColumns,
  deleteView,
  filtersFromSearch,
  filtersToSearch,
  loadViews,
  NO_FILTERS,
  nextSort,
  pageCount,
  pageLabel,
  saveView,
  sortMark,
  sparkPath,
  tableParams,
  viewSearch,
} from "./filters";

afterEach(() => localStorage.clear());

describe("runs view in the URL", () => {
  it("round-trips every part of the view", () => {
    const filters = {
      status: "FAILED" as const,
      q: "grpo math",
      page: 2,
      sort: "-metric:reward/mean",
      metrics: ["reward/mean", "eval/accuracy"],
      project: 3,
      group: 9,
      recipe: "grpo",
      name: "lr",
    };
    expect(filtersFromSearch(filtersToSearch(filters))).toEqual(filters);
    expect(filtersToSearch({ ...NO_FILTERS, q: "  " }).toString()).toBe("");
  });

  it("tells no columns in the URL from an empty column list", () => {
    expect(filtersFromSearch(new URLSearchParams("")).metrics).toBeNull();
    expect(filtersFromSearch(new URLSearchParams("metrics=")).metrics).toEqual([]);
    expect(filtersFromSearch(new URLSearchParams("metrics=a,,b,a")).metrics).toEqual(["a", "b"]);
  });

  it("ignores unknown statuses, bad pages and bad ids", () => {
    expect(filtersFromSearch(new URLSearchParams("status=BOGUS&page=-3&project=x&group=0"))).toEqual(NO_FILTERS);
  });

  it("asks for the page, the filters and the shown columns with their sparklines", () => {
    const filters = { ...NO_FILTERS, status: "RUNNING" as const, q: " x ", page: 3, sort: "name", group: 4 };
    expect(tableParams(filters, ["reward/mean", "loss"], 50)).toEqual({
      status: "RUNNING",
      q: "x",
      sort: "name",
      group: 4,
      limit: 50,
      offset: 150,
      metrics: "reward/mean,loss",
      spark: 30,
    });
    expect(tableParams(NO_FILTERS, [], 50)).toEqual({ limit: 50, offset: 0 });
  });
});

describe("columns, sorts and views", () => {
  it("shows the URL's columns, else the remembered ones, else reward/mean when reported", () => {
    expect(chosenColumns(["a"], ["b"], ["reward/mean"])).toEqual(["a"]);
    expect(chosenColumns(null, ["b"], ["reward/mean"])).toEqual(["b"]);
    expect(chosenColumns(null, null, ["loss", "reward/mean"])).toEqual(["reward/mean"]);
    expect(chosenColumns(null, null, ["loss"])).toEqual([]);
  });

  it("sorts numbers newest or largest first, then flips", () => {
    expect(nextSort("-created_at", "duration", true)).toBe("-duration");
    expect(nextSort("-duration", "duration", true)).toBe("duration");
    expect(nextSort("duration", "duration", true)).toBe("-duration");
    expect(nextSort("-created_at", "name", false)).toBe("name");
    expect(sortMark("-metric:x", "metric:x")).toBe("▼");
    expect(sortMark("name", "name")).toBe("▲");
    expect(sortMark("name", "status")).toBe("");
  });

  it("saves views in this browser, replacing one of the same name, and opens them at page one", () => {
    const search = viewSearch({ ...NO_FILTERS, page: 4, q: "lr" }, ["reward/mean"]);
    expect(search).toBe("q=lr&metrics=reward%2Fmean");
    let views = saveView([], { name: "mine", search });
    views = saveView(views, { name: "other", search: "status=FAILED" });
    views = saveView(views, { name: "mine", search: "q=new" });
    expect(loadViews()).toEqual([
      { name: "mine", search: "q=new" },
      { name: "other", search: "status=FAILED" },
    ]);
    expect(deleteView(views, "mine")).toEqual([{ name: "other", search: "status=FAILED" }]);
    expect(loadViews()).toHaveLength(1);
    localStorage.setItem("barrel.runViews", "{broken");
    expect(loadViews()).toEqual([]);
  });

  it("draws a sparkline over the finite points, scaled to the box", () => {
    expect(sparkPath([0, 1], 10, 10)).toBe("0.0,9.0 10.0,1.0");
    // NaN is skipped, not drawn at zero; a flat line sits mid-box.
    expect(sparkPath([1, Number.NaN, 1], 10, 10)).toBe("0.0,5.0 10.0,5.0");
    expect(sparkPath([Number.NaN, 2], 10, 10)).toBeNull();
  });

  it("labels pages", () => {
    expect(pageLabel(1, 50, 50, 230)).toBe("51–100 of 230");
    expect(pageLabel(0, 50, 0, 0)).toBe("0 runs");
    expect(pageCount(0)).toBe(1);
    expect(pageCount(101, 50)).toBe(3);
  });
});
