import { describe, expect, it } from "vitest";

import { safeNextPath } from "./next";

describe("safeNextPath", () => {
  it("keeps same-site paths", () => {
    expect(safeNextPath("/runs/12")).toBe("/runs/12");
    expect(safeNextPath("/?status=RUNNING")).toBe("/?status=RUNNING");
  });

  it("refuses other sites and loops back to /", () => {
    expect(safeNextPath("https://evil.example/")).toBe("/");
    expect(safeNextPath("//evil.example/")).toBe("/");
    expect(safeNextPath("/\\evil.example")).toBe("/");
    expect(safeNextPath("/login?next=/x")).toBe("/");
    expect(safeNextPath(null)).toBe("/");
  });
});
