import { describe, expect, it } from "vitest";

import { addDays, barHeights, causeLabel, filtersFrom, fixProblems, fixedTotal, signatureTitle, weekLabel } from "./format";

describe("triage helpers", () => {
  it("names infra causes, and calls every workload fault user code", () => {
    expect(causeLabel("infra", "oom")).toBe("out of memory");
    expect(causeLabel("infra", "lost_job")).toBe("job lost by Ray");
    expect(causeLabel("infra", "new_kind")).toBe("new_kind");
    expect(causeLabel("workload", "")).toBe("user code");
  });

  it("titles a signature by its exception and message", () => {
    expect(signatureTitle({ exception: "KeyError", message: "'reward'" })).toBe("KeyError: 'reward'");
    expect(signatureTitle({ exception: "MemoryError", message: "" })).toBe("MemoryError");
    expect(signatureTitle({ exception: "", message: "lost: Ray no longer knows job <uuid>" })).toBe(
      "lost: Ray no longer knows job <uuid>",
    );
  });

  it("checks the fix form as the server does", () => {
    expect(fixProblems("renamed the key", "abcdef1")).toEqual({});
    expect(fixProblems("", "")).toEqual({});
    expect(fixProblems("x".repeat(2001), "")).toHaveProperty("note");
    expect(fixProblems("a\u0000b", "")).toHaveProperty("note");
    expect(fixProblems("", "abc")).toHaveProperty("commit");
    expect(fixProblems("", "not-a-hash")).toHaveProperty("commit");
    expect(fixProblems("", "a".repeat(65))).toHaveProperty("commit");
  });

  it("reads only known filters from the query string", () => {
    expect(filtersFrom(new URLSearchParams("fault=infra&fixed=false"))).toEqual({ fault: "infra", fixed: "false" });
    expect(filtersFrom(new URLSearchParams("fault=user&fixed=yes"))).toEqual({ fault: "", fixed: "" });
  });

  it("scales bars to the largest count, a non-zero count never invisible", () => {
    expect(barHeights([0, 2, 4], 20)).toEqual([0, 10, 20]);
    expect(barHeights([1, 100], 20)[0]).toBe(1);
    expect(barHeights([0, 0], 20)).toEqual([0, 0]);
  });

  it("labels weeks and counts the fixes", () => {
    expect(weekLabel("2026-11-30")).toBe("Nov 30");
    expect(addDays("2026-11-30", 7)).toBe("2026-12-07");
    expect(fixedTotal([{ week: "2026-11-23", fixed: 2, regressed: 1 }, { week: "2026-11-30", fixed: 3, regressed: 0 }])).toBe(5);
  });
});
