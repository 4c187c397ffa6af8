import { describe, expect, it } from "vitest";

import { defaultKeys, keyCounts, orderKeys } from "./keys";

describe("metric keys of a comparison", () => {
  it("puts reward/ and eval/ first, then the run page's namespace order", () => {
    expect(orderKeys(["time/step", "eval/acc", "policy/kl", "loss", "reward/mean", "eval/a", "zeta/x"])).toEqual([
      "reward/mean",
      "eval/a",
      "eval/acc",
      "policy/kl",
      "time/step",
      "zeta/x",
      "loss",
    ]);
  });

  it("counts in how many runs a key appears", () => {
    expect(keyCounts([["a", "b"], ["a"], ["a", "a"]])).toEqual(
      new Map([
        ["a", 3],
        ["b", 1],
      ]),
    );
  });

  it("defaults to the keys every run has, capped", () => {
    const runs = [
      ["reward/mean", "policy/kl", "eval/acc", "only/one"],
      ["policy/kl", "reward/mean", "eval/acc"],
    ];
    expect(defaultKeys(runs)).toEqual(["reward/mean", "eval/acc", "policy/kl"]);
    expect(defaultKeys(runs, 2)).toEqual(["reward/mean", "eval/acc"]);
    // Nothing shared: any run's keys rather than an empty page.
    expect(defaultKeys([["a/x"], ["b/y"]])).toEqual(["a/x", "b/y"]);
  });
});
