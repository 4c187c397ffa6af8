import { describe, expect, it } from "vitest";

import {
  durationRange,
  formatEta,
  formatLimit,
  formatResources,
  formatShare,
  formatWaited,
  ordinal,
  preemptionOutcome,
  progressOf,
  shortDuration,
} from "./format";

const NOW = Date.parse("2026-12-04T12:00:00Z");
const at = (seconds: number) => new Date(NOW + seconds * 1000).toISOString();

describe("estimated starts", () => {
  it("read as a wait with its range, the absolute times on hover", () => {
    const eta = formatEta({ start: at(240), low: at(180), high: at(360), estimated_at: at(-5) }, NOW);
    expect(eta.text).toBe("in ~4 min (3–6 min)");
    expect(eta.kind).toBe("estimate");
    expect(eta.title).toMatch(/^2026-12-0\d \d\d:04 \(between \d\d:03 and \d\d:06\); estimated at \d\d:59$/);
  });

  it("round a long wait to hours and a short one to under a minute", () => {
    expect(formatEta({ start: at(5400), low: at(3600), high: at(9000) }, NOW).text).toBe("in ~1 h 30 min (1 h–2 h 30 min)");
    expect(formatEta({ start: at(20), low: at(5), high: at(90) }, NOW).text).toBe("in <1 min (<1 min–2 min)");
    // A start already past (the next pass admits it) still reads as imminent, and an empty range is left out.
    expect(formatEta({ start: at(-30), low: at(-30), high: at(-30) }, NOW).text).toBe("in <1 min");
  });

  it("say why there is no estimate, or that it is still being made", () => {
    const unknown = formatEta({ unknown: "it waits for runs with no known end" }, NOW);
    expect(unknown).toMatchObject({ text: "no estimate: it waits for runs with no known end", kind: "unknown" });
    expect(formatEta(null, NOW)).toMatchObject({ text: "estimating…", kind: "pending" });
    expect(formatEta(undefined, NOW).text).toBe("estimating…");
    expect(formatEta({ start: "garbage" }, NOW).text).toBe("estimating…");
  });
});

describe("durations", () => {
  it("are rounded for reading", () => {
    expect([5, 90, 3600, 4000, 86_400 + 3 * 3600, 2 * 86_400].map((s) => shortDuration(s * 1000))).toEqual([
      "<1 min",
      "2 min",
      "1 h",
      "1 h 7 min",
      "1 d 3 h",
      "2 d",
    ]);
    expect(durationRange(180_000, 360_000)).toBe("3–6 min");
    expect(durationRange(1_800_000, 7_200_000)).toBe("30 min–2 h");
    expect(durationRange(120_000, 130_000)).toBe("2 min");
  });
});

describe("resources and quotas", () => {
  it("read as amounts, limits and shares", () => {
    expect(formatResources({ GPU: 1, CPU: 2.5 })).toBe("2.5 CPU, 1 GPU");
    expect(formatResources({ CPU: 0 })).toBe("–");
    const cluster = { CPU: 2, memory: 16644875879, "node:__internal_head__": 1, "node:192.0.2.2": 1, object_store_memory: 7e9 };
    expect(formatResources({ ...cluster, "accelerator_type:A100": 1, GPU: 8 })).toBe("2 CPU, 8 GPU");
    expect(formatResources(null)).toBe("–");
    expect(formatLimit(4)).toBe("4");
    expect(formatLimit(null)).toBe("no limit");
    expect(formatShare(0.0625)).toBe("6%");
    expect([1, 2, 3, 4, 11, 12, 13, 21, 22, 101].map(ordinal)).toEqual([
      "1st",
      "2nd",
      "3rd",
      "4th",
      "11th",
      "12th",
      "13th",
      "21st",
      "22nd",
      "101st",
    ]);
    expect(progressOf(50, 200)).toBe(0.25);
    expect(progressOf(null, 200)).toBe(0);
    expect(progressOf(5, null)).toBeNull();
    expect(progressOf(300, 200)).toBe(1);
  });
});

describe("the audit", () => {
  it("reads a wait in seconds under a minute, then rounded", () => {
    expect([0, 0.4, 12.4, 59.4, 59.6, 250, 4000].map(formatWaited)).toEqual(["0 s", "0 s", "12 s", "59 s", "1 min", "4 min", "1 h 7 min"]);
    expect(["NaN", "Infinity", -1, null].map(formatWaited)).toEqual(["–", "–", "–", "–"]);
  });

  it("says what became of a preempted attempt without repeating the reason", () => {
    const reason = "run 15 of lab waits";
    const asked = { reason, stopped_after_step: null, outcome: "" };
    expect(preemptionOutcome(asked)).toBe("stopping…");
    expect(preemptionOutcome({ ...asked, stopped_after_step: 12 })).toBe("stopped after step 12");
    const outcome = `preempted (${reason}); it stopped after step 12; resumes from its checkpoint of step 10`;
    expect(preemptionOutcome({ ...asked, stopped_after_step: 12, outcome })).toBe("it stopped after step 12; resumes from its checkpoint of step 10");
    expect(preemptionOutcome({ ...asked, outcome: "the job failed" })).toBe("the job failed");
  });
});
