import { describe, expect, it } from "vitest";

import { filtersFromSearch, filtersToSearch, listParams, pageCount, pageLabel } from "./filters";

describe("runs filters", () => {
  it("round-trips through the URL", () => {
    const filters = { status: "FAILED" as const, name: "grpo", page: 2 };
    expect(filtersFromSearch(filtersToSearch(filters))).toEqual(filters);
    expect(filtersToSearch({ status: null, name: "  ", page: 0 }).toString()).toBe("");
  });

  it("ignores unknown statuses and bad pages", () => {
    expect(filtersFromSearch(new URLSearchParams("status=BOGUS&page=-3"))).toEqual({ status: null, name: "", page: 0 });
  });

  it("turns pages into limit and offset", () => {
    expect(listParams({ status: "RUNNING", name: " x ", page: 3 }, 50)).toEqual({
      status: "RUNNING",
      name: "x",
      limit: 50,
      offset: 150,
    });
    expect(listParams({ status: null, name: "", page: 0 }, 50)).toEqual({ limit: 50, offset: 0 });
  });

  it("keeps a project from the URL (where an MLflow experiment link leads)", () => {
    const filters = filtersFromSearch(new URLSearchParams("project=3"));
    expect(filters).toEqual({ status: null, name: "", page: 0, project: 3 });
    expect(filtersToSearch(filters).toString()).toBe("project=3");
    expect(listParams(filters, 50)).toEqual({ project: 3, limit: 50, offset: 0 });
    expect(filtersFromSearch(new URLSearchParams("project=x")).project).toBeUndefined();
  });

  it("labels pages", () => {
    expect(pageLabel(1, 50, 50, 230)).toBe("51–100 of 230");
    expect(pageLabel(0, 50, 0, 0)).toBe("0 runs");
    expect(pageCount(0)).toBe(1);
    expect(pageCount(101, 50)).toBe(3);
  });
});
