import { describe, expect, it } from "vitest";

import {
  STEP_INCREMENTS,
  distributionData,
  distributionsOf,
  loadLayout,
  saveLayout,
  toggled,
  flatRange,
  focusStep,
  formatTicks,
  groupByNamespace,
  isRaw,
  namespaceOf,
  smoothEma,
  stepMarks,
  stepRange,
  toUplotData,
  unitOf,
  withFocus,
} from "./charts";

describe("namespaceOf", () => {
  it("is the part before the first slash", () => {
    expect(namespaceOf("reward/mean")).toBe("reward");
    expect(namespaceOf("eval/gsm8k/acc")).toBe("eval");
    expect(namespaceOf("loss")).toBe("other");
    expect(namespaceOf("/odd")).toBe("other");
  });
});

describe("groupByNamespace", () => {
  it("orders known namespaces as the design lists them, then others, then keys without one", () => {
    const groups = groupByNamespace([
      "system/cpu_util",
      "zeta/thing",
      "loss",
      "policy/loss",
      "reward/std",
      "reward/mean",
      "alpha/x",
      "policy/entropy",
    ]);
    expect(groups).toEqual([
      { namespace: "reward", keys: ["reward/mean", "reward/std"] },
      { namespace: "policy", keys: ["policy/entropy", "policy/loss"] },
      { namespace: "system", keys: ["system/cpu_util"] },
      { namespace: "alpha", keys: ["alpha/x"] },
      { namespace: "zeta", keys: ["zeta/thing"] },
      { namespace: "other", keys: ["loss"] },
    ]);
  });

  it("ignores duplicates and handles no keys", () => {
    expect(groupByNamespace(["a/b", "a/b"])).toEqual([{ namespace: "a", keys: ["a/b"] }]);
    // A code run's sandbox health sits beside its reward, before the rest of the run's figures.
    expect(
      groupByNamespace(["policy/loss", "sandbox/failures", "reward_pipeline/masked", "reward/mean"]).map(
        (g) => g.namespace,
      ),
    ).toEqual(["reward", "sandbox", "reward_pipeline", "policy"]);
    // An agent run's episodes (tool calls, their errors) come right after the sandbox's health.
    expect(
      groupByNamespace(["mismatch/engine_kl", "agent/tool_calls", "sandbox/failures", "reward/mean"]).map(
        (g) => g.namespace,
      ),
    ).toEqual(["reward", "sandbox", "agent", "mismatch"]);
    expect(groupByNamespace([])).toEqual([]);
  });
});

describe("toUplotData", () => {
  const series = {
    key: "k",
    count: 3,
    step: [1, 2, 3],
    min: [0, Number.NaN, 1],
    max: [2, Number.NaN, Number.POSITIVE_INFINITY],
    mean: [1, Number.NaN, 2],
    last: [1, Number.NaN, 2],
  };

  it("orders columns step, mean, min, max, smoothed with gaps for non-finite values", () => {
    expect(toUplotData(series)).toEqual([
      [1, 2, 3],
      [1, null, 2],
      [0, null, 1],
      [2, null, null],
      [1, null, 2], // no smoothing: the mean itself
    ]);
  });

  it("leaves values at or below zero out of a log axis", () => {
    const data = toUplotData({ ...series, min: [-1, Number.NaN, 0], mean: [0, Number.NaN, 2] }, { smoothing: 0, logScale: true, xAxis: "step" });
    expect(data[1]).toEqual([null, null, 2]);
    expect(data[2]).toEqual([null, null, null]);
    expect(data[4]).toEqual([null, null, 2]);
  });
});

describe("smoothEma", () => {
  it("is TensorBoard's debiased moving average", () => {
    // w = 0.5: 0.5·1 / 0.5 = 1; (0.25 + 1) / 0.75 = 5/3; (0.625 + 1.5) / 0.875 = 17/7
    const smoothed = smoothEma([1, 2, 3], 0.5);
    expect(smoothed[0]).toBeCloseTo(1);
    expect(smoothed[1]).toBeCloseTo(5 / 3);
    expect(smoothed[2]).toBeCloseTo(17 / 7);
  });

  it("keeps a constant series where it is, and does nothing at weight 0", () => {
    expect(smoothEma([4, 4, 4, 4], 0.9).every((v) => v !== null && Math.abs(v - 4) < 1e-12)).toBe(true);
    expect(smoothEma([1, 5, 2], 0)).toEqual([1, 5, 2]);
  });

  it("skips non-finite values, leaving gaps, and averages on across them", () => {
    const smoothed = smoothEma([1, Number.NaN, 3], 0.5);
    expect(smoothed[1]).toBeNull();
    expect(smoothed[2]).toBeCloseTo((0.25 + 1.5) / 0.75);
  });
});

describe("isRaw", () => {
  it("is true when every bucket is a single point, NaN included", () => {
    expect(isRaw({ key: "k", count: 2, step: [1, 2], min: [1, Number.NaN], max: [1, Number.NaN], mean: [1, Number.NaN], last: [1, Number.NaN] })).toBe(true);
    expect(isRaw({ key: "k", count: 5, step: [1], min: [0], max: [1], mean: [0.5], last: [1] })).toBe(false);
  });
});

describe("formatTicks", () => {
  it("uses as many decimals as the tick spacing needs", () => {
    expect(formatTicks([0, 0.0005, 0.001])).toEqual(["0.0000", "0.0005", "0.0010"]);
    expect(formatTicks([0, 0.25, 0.5, 0.75])).toEqual(["0.00", "0.25", "0.50", "0.75"]);
    expect(formatTicks([0, 1000, 2000])).toEqual(["0", "1000", "2000"]);
  });

  it("keeps fixed notation for a series that varies only in a late digit", () => {
    expect(formatTicks([0.1006, 0.10065, 0.1007])).toEqual(["0.10060", "0.10065", "0.10070"]);
    expect(formatTicks([1234.5, 1234.50001])).toEqual(["1234.50000", "1234.50001"]);
  });

  it("switches to scientific notation for very fine or very large ticks", () => {
    expect(formatTicks([0, 0.00001, 0.00002])).toEqual(["0", "1e-5", "2e-5"]);
    expect(formatTicks([2e6, 4e6])).toEqual(["2e+6", "4e+6"]);
    expect(formatTicks([1.5e-6, 2e-6])).toEqual(["1.5e-6", "2.0e-6"]);
  });
});

describe("STEP_INCREMENTS", () => {
  it("spaces step ticks by whole steps, 1-2-5, up to steps beyond any run", () => {
    expect(STEP_INCREMENTS.slice(0, 7)).toEqual([1, 2, 5, 10, 20, 50, 100]);
    expect(STEP_INCREMENTS.every((x) => Number.isInteger(x))).toBe(true);
    expect(STEP_INCREMENTS.at(-1)).toBeGreaterThanOrEqual(1e15);
  });
});

describe("flatRange", () => {
  it("gives data flat up to float noise room around its value, which uPlot cannot range", () => {
    // float32 noise around 1: an importance ratio that crashed the run page
    expect(flatRange(0.9999998807907104, 1.0000001192092896)).toEqual([0.99, 1.01]);
    expect(flatRange(-2.5, -2.5)).toEqual([-2.525, -2.475]);
    expect(flatRange(0, 0)).toEqual([-1, 1]);
  });

  it("leaves data that really varies to uPlot", () => {
    expect(flatRange(1, 1.00001)).toBeNull();
    expect(flatRange(0, 1e-12)).toBeNull();
    expect(flatRange(-3, 5)).toBeNull();
  });
});

describe("axis units, marks and zoom ranges", () => {
  it("reads a metric's unit from its DESIGN name", () => {
    expect(unitOf("time/rollout_s")).toBe("seconds");
    expect(unitOf("sandbox/start_ms_p99")).toBe("milliseconds");
    expect(unitOf("perf/tokens_per_s")).toBe("tokens / s");
    expect(unitOf("reward/zero_std_frac")).toBe("fraction");
    expect(unitOf("mismatch/engine_kl")).toBe("nats");
    expect(unitOf("policy/kl_ref")).toBe("nats");
    expect(unitOf("response_length/mean")).toBe("tokens");
    expect(unitOf("system/rss_gb")).toBe("GB");
    expect(unitOf("reward/mean")).toBe("");
    expect(unitOf("policy/kludge")).toBe("");
  });

  it("marks checkpoints and the steps resumed attempts began from, in step order", () => {
    const marks = stepMarks(
      [
        { id: 2, step: 20 },
        { id: 1, step: 10 },
      ],
      [
        { number: 1, resume_from: null },
        { number: 2, resume_from: 1 },
        { number: 3, resume_from: 99 },
      ],
    );
    expect(marks).toEqual([
      { step: 10, kind: "checkpoint", label: "checkpoint at step 10" },
      { step: 10, kind: "resume", label: "attempt 2 resumed from step 10" },
      { step: 20, kind: "checkpoint", label: "checkpoint at step 20" },
    ]);
  });

  it("widens a zoomed scale to whole steps", () => {
    expect(stepRange(1.6, 4.2)).toEqual([1, 5]);
    expect(stepRange(-3, 2)).toEqual([0, 2]);
    expect(stepRange(undefined, 2)).toBeNull();
    expect(stepRange(5, 1)).toBeNull();
  });
});

describe("distributions and the project's chart layout", () => {
  it("finds a namespace's distribution from its summary keys", () => {
    const keys = ["reward/min", "reward/p10", "reward/p50", "reward/p90", "reward/max", "reward/mean", "response_length/min", "response_length/mean", "response_length/max", "policy/loss", "policy/mean"];
    expect(distributionsOf(keys)).toEqual([
      { namespace: "reward", centre: "reward/p50", inner: ["reward/p10", "reward/p90"], outer: ["reward/min", "reward/max"] },
      { namespace: "response_length", centre: "response_length/mean", inner: null, outer: ["response_length/min", "response_length/max"] },
    ]);
  });

  it("aligns the distribution's keys on their steps, min and max from their buckets' extremes", () => {
    const s = (key: string, step: number[], mean: number[], lo = mean, hi = mean) => ({ key, count: step.length, step, min: lo, max: hi, mean, last: mean });
    const d = { namespace: "r", centre: "r/mean", inner: null, outer: ["r/min", "r/max"] as [string, string] };
    const data = distributionData(d, {
      "r/mean": s("r/mean", [0, 10], [0.5, 0.6]),
      "r/min": s("r/min", [0, 10], [0.2, 0.3], [0.1, 0.25], [0.3, 0.35]),
      "r/max": s("r/max", [10, 20], [0.9, Number.NaN], [0.8, 0.9], [0.95, Number.POSITIVE_INFINITY]),
    });
    expect(data).toEqual([
      [0, 10, 20],
      [0.1, 0.25, null],
      [null, null, null],
      [0.5, 0.6, null],
      [null, null, null],
      [null, 0.95, null],
    ]);
  });

  it("remembers pins and folds per project, and survives a broken entry", () => {
    const store = new Map<string, string>();
    globalThis.localStorage = {
      getItem: (k: string) => store.get(k) ?? null,
      setItem: (k: string, v: string) => void store.set(k, v),
    } as Storage;
    saveLayout(3, { pinned: toggled(toggled([], "reward/mean"), "loss"), folded: ["system"] });
    expect(loadLayout(3)).toEqual({ pinned: ["reward/mean", "loss"], folded: ["system"] });
    expect(loadLayout(4)).toEqual({ pinned: [], folded: [] });
    expect(toggled(["a", "b"], "a")).toEqual(["b"]);
    store.set("barrel.chartLayout.5", "{oops");
    expect(loadLayout(5)).toEqual({ pinned: [], folded: [] });
  });
});

describe("focusStep and withFocus", () => {
  it("reads a whole, non-negative step from ?step=, and nothing else", () => {
    expect(focusStep("120")).toBe(120);
    expect(focusStep(" 0 ")).toBe(0);
    for (const bad of [null, "", "-3", "1.5", "1e3", "abc", "12abc", "9999999999999999"]) expect(focusStep(bad)).toBeNull();
  });

  it("adds the linked-to step as a focus mark, after the others", () => {
    const checkpoint = { step: 40, kind: "checkpoint" as const, label: "checkpoint at step 40" };
    expect(withFocus([checkpoint], 40)).toEqual([checkpoint, { step: 40, kind: "focus", label: "step 40" }]);
    const none = [checkpoint];
    expect(withFocus(none, null)).toBe(none);
  });
});
