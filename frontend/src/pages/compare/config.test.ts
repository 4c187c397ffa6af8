import { describe, expect, it } from "vitest";

import {
  diffConfigs,
  differingPaths,
  flattenConfig,
  formatConfigValue,
  stableStringify,
  valueAt,
} from "./config";

describe("config paths", () => {
  it("stringifies with sorted keys, so equal objects read the same", () => {
    expect(stableStringify({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: null } })).toBe('{"a":{"c":null,"d":[1,{"y":2,"z":1}]},"b":1}');
    expect(stableStringify({ a: 1, b: 2 })).toBe(stableStringify({ b: 2, a: 1 }));
    expect(stableStringify("x")).toBe('"x"');
  });

  it("flattens nested objects into dotted paths; arrays and empty objects are leaves", () => {
    const flat = flattenConfig({ optim: { lr: 1e-6, betas: [0.9, 0.99] }, seed: 0, extra: {} });
    expect([...flat.entries()]).toEqual([
      ["optim.lr", 1e-6],
      ["optim.betas", [0.9, 0.99]],
      ["seed", 0],
      ["extra", {}],
    ]);
    expect(flattenConfig(null).size).toBe(0);
    expect([...flattenConfig(3)]).toEqual([["", 3]]);
  });

  it("reads a value at a path, objects included", () => {
    const config = { optim: { lr: 1e-6, sched: { kind: "cos" } } };
    expect(valueAt(config, "optim.lr")).toBe(1e-6);
    expect(valueAt(config, "optim.sched")).toEqual({ kind: "cos" });
    expect(valueAt(config, "optim.nope")).toBeUndefined();
    expect(valueAt(config, "optim.lr.x")).toBeUndefined();
  });

  it("lists the paths that differ, absent counting as a value", () => {
    const configs = [
      { seed: 0, optim: { lr: 1e-6, wd: 0 }, model: "q" },
      { seed: 1, optim: { lr: 1e-6, wd: 0 }, model: "q", extra: true },
      { seed: 2, optim: { lr: 3e-6, wd: 0 }, model: "q" },
    ];
    expect(differingPaths(configs)).toEqual(["extra", "optim.lr", "seed"]);
    expect(differingPaths([{ a: [1, 2] }, { a: [1, 2] }])).toEqual([]);
    expect(differingPaths([{ a: { x: 1, y: 2 } }, { a: { y: 2, x: 1 } }])).toEqual([]);
  });

  it("diffs two configs, left to right", () => {
    expect(diffConfigs({ lr: 1e-6, steps: 100, tags: ["a"] }, { lr: 3e-6, steps: 100, tags: ["a", "b"], new: "x" })).toEqual([
      { path: "lr", left: "1e-6", right: "3e-6" },
      { path: "new", left: "(unset)", right: "x" },
      { path: "tags", left: '["a"]', right: '["a","b"]' },
    ]);
  });

  it("formats values for people", () => {
    expect(formatConfigValue(0.000001)).toBe("1e-6");
    expect(formatConfigValue(0.5)).toBe("0.5");
    expect(formatConfigValue(0)).toBe("0");
    expect(formatConfigValue("adam")).toBe("adam");
    expect(formatConfigValue(true)).toBe("true");
    expect(formatConfigValue(undefined)).toBe("(unset)");
  });
});
