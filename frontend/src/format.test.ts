import { describe, expect, it } from "vitest";

import { formatAgo, formatDuration, plural, runDurationMs } from "./format";

describe("formatDuration", () => {
  it("uses the two largest units", () => {
    expect(formatDuration(12_000)).toBe("12s");
    expect(formatDuration(245_000)).toBe("4m 05s");
    expect(formatDuration(7_380_000)).toBe("2h 03m");
    expect(formatDuration(90_000_000)).toBe("1d 01h");
    expect(formatDuration(-1)).toBe("–");
  });
});

describe("runDurationMs", () => {
  const now = Date.parse("2025-01-01T01:00:00Z");
  it("is null before the run starts", () => {
    expect(runDurationMs({ started_at: null, finished_at: null }, now)).toBeNull();
  });
  it("counts every attempt of a resumed run, also while it waits to start again", () => {
    const resumed = { started_at: "2025-01-01T00:30:00Z", finished_at: null, earlier_attempts_s: 600 };
    expect(runDurationMs(resumed, now)).toBe(2_400_000);
    expect(runDurationMs({ started_at: null, finished_at: null, earlier_attempts_s: 600 }, now)).toBe(600_000);
  });
  it("counts to now while running and to the finish after", () => {
    expect(runDurationMs({ started_at: "2025-01-01T00:00:00Z", finished_at: null }, now)).toBe(3_600_000);
    expect(runDurationMs({ started_at: "2025-01-01T00:00:00Z", finished_at: "2025-01-01T00:00:30Z" }, now)).toBe(30_000);
  });
});

describe("formatAgo", () => {
  const now = Date.parse("2025-01-03T00:00:00Z");
  it("is coarse", () => {
    expect(formatAgo("2025-01-02T23:59:50Z", now)).toBe("just now");
    expect(formatAgo("2025-01-02T23:55:00Z", now)).toBe("5 min ago");
    expect(formatAgo("2025-01-02T21:00:00Z", now)).toBe("3 h ago");
    expect(formatAgo("2024-12-30T00:00:00Z", now)).toBe("4 d ago");
  });
});

describe("plural", () => {
  it("counts in the singular only for one", () => {
    expect(plural(1, "chart")).toBe("1 chart");
    expect(plural(0, "chart")).toBe("0 charts");
    expect(plural(3, "chart")).toBe("3 charts");
    expect(plural(2, "query", "queries")).toBe("2 queries");
  });
});
