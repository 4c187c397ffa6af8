import { describe, expect, it } from "vitest";

import {
  configKey,
  differingParamKeys,
  differingTagKeys,
  groupRunsBy,
  GroupingError,
  parseGroupKey,
  type RunForGrouping,
} from "./grouping";

function labelsAndRuns(runs: readonly RunForGrouping[], by: string): [string, number[]][] {
  return groupRunsBy(runs, by).map((g) => [g.label, g.runIds]);
}

describe("grouping keys", () => {
  it("read as the server reads group_by: a config path, bare or config., a tag prefix, a param", () => {
    expect(parseGroupKey("optim.lr")).toEqual({ kind: "config", path: "optim.lr" });
    expect(parseGroupKey("config.optim.lr")).toEqual({ kind: "config", path: "optim.lr" });
    expect(parseGroupKey("tag:seed")).toEqual({ kind: "tag", prefix: "seed" });
    expect(parseGroupKey("tag:env:eu")).toEqual({ kind: "tag", prefix: "env:eu" });
    expect(parseGroupKey("tag:région")).toEqual({ kind: "tag", prefix: "région" });
    expect(parseGroupKey("param:trainer/lr")).toEqual({ kind: "param", name: "trainer/lr" });
    for (const bad of ["", "tags:seed", "tag:", "tag:a b", "param:", "config.", "optim..lr", ".lr"]) {
      expect(parseGroupKey(bad)).toBeNull();
    }
  });

  it("write a config path bare unless it would read as another kind", () => {
    expect(configKey("optim.lr")).toBe("optim.lr");
    expect(configKey("config.x")).toBe("config.config.x");
    expect(configKey("a:b")).toBe("config.a:b");
    expect(parseGroupKey(configKey("a:b"))).toEqual({ kind: "config", path: "a:b" });
  });
});

describe("groupRunsBy", () => {
  it("groups runs by a path's value, numbers in order, runs without it last", () => {
    const runs = [
      { id: 1, config: { optim: { lr: 3e-6 } } },
      { id: 2, config: { optim: { lr: 1e-6 } } },
      { id: 3, config: { optim: {} } },
      { id: 4, config: { optim: { lr: 3e-6 } } },
      { id: 5, config: { optim: { lr: 1e-6 } } },
    ];
    const expected = [
      ["lr=1e-6", [2, 5]],
      ["lr=3e-6", [1, 4]],
      ["lr=(unset)", [3]],
    ];
    expect(labelsAndRuns(runs, "optim.lr")).toEqual(expected);
    expect(labelsAndRuns(runs, "config.optim.lr")).toEqual(expected);
  });

  it("groups by an object or array value, compared by its stable text", () => {
    const runs = [
      { id: 1, config: { sched: { kind: "cos", warmup: 10 } } },
      { id: 2, config: { sched: { warmup: 10, kind: "cos" } } },
      { id: 3, config: { sched: { kind: "lin", warmup: 10 } } },
    ];
    const groups = groupRunsBy(runs, "sched");
    expect(groups.map((g) => g.runIds)).toEqual([[1, 2], [3]]);
    expect(groups[0]?.label).toBe('sched={"kind":"cos","warmup":10}');
  });

  it("groups by a tag's value, prefix:value or prefix=value, runs without one in (none)", () => {
    const runs = [
      { id: 1, config: {}, tags: ["seed:10", "baseline"] },
      { id: 2, config: {}, tags: ["seed=2"] },
      { id: 3, config: {}, tags: ["other:1"] },
      { id: 4, config: {}, tags: ["seed:2", "seed=2"] },
      { id: 5, config: {}, tags: ["seedling:3"] },
    ];
    // Numeric text sorts as numbers: 2 before 10.
    expect(labelsAndRuns(runs, "tag:seed")).toEqual([
      ["seed=2", [2, 4]],
      ["seed=10", [1]],
      ["(none)", [3, 5]],
    ]);
  });

  it("refuses a run with two tags of the prefix, naming it: a run is in one group", () => {
    const runs = [
      { id: 1, config: {}, tags: ["seed:1"] },
      { id: 7, name: "pace", config: {}, tags: ["seed:1", "seed:2"] },
    ];
    expect(() => groupRunsBy(runs, "tag:seed")).toThrow(GroupingError);
    expect(() => groupRunsBy(runs, "tag:seed")).toThrow("Run #7 (pace) has 2 tags with prefix seed: seed:1 and seed:2");
  });

  it("groups external runs by an MLflow param, numeric text in numeric order", () => {
    const runs: RunForGrouping[] = [
      { id: 1, config: {}, params: { "trainer/lr": "1e-06" } },
      { id: 2, config: {}, params: { "trainer/lr": "1e-05" } },
      { id: 3, config: {}, params: {} },
      { id: 4, config: {}, params: { "trainer/lr": "1e-06" } },
    ];
    expect(labelsAndRuns(runs, "param:trainer/lr")).toEqual([
      ["trainer/lr=1e-06", [1, 4]],
      ["trainer/lr=1e-05", [2]],
      ["(none)", [3]],
    ]);
  });

  it("refuses a key that reads as none, saying the syntax", () => {
    expect(() => groupRunsBy([], "tags:seed")).toThrow(/tag:<prefix> or param:<name>/);
  });
});

describe("the keys the picker offers", () => {
  it("are the tag prefixes and params whose values differ between the runs", () => {
    const runs: RunForGrouping[] = [
      { id: 1, config: {}, tags: ["seed:1", "team:rl", "baseline"], params: { lr: "1", batch: "64" } },
      { id: 2, config: {}, tags: ["seed:2", "team:rl"], params: { lr: "2", batch: "64" } },
      { id: 3, config: {}, tags: ["team:rl", "algo=ppo"], params: { batch: "64" } },
    ];
    expect(differingTagKeys(runs)).toEqual(["tag:algo", "tag:seed"]);
    expect(differingParamKeys(runs)).toEqual(["param:lr"]);
  });
});
