import { describe, expect, it } from "vitest";

import { compareRunsUrl, compareSearch, DEFAULT_STATE, parseCompareState, parseIds } from "./urlState";

const parse = (search: string) => parseCompareState(new URLSearchParams(search));

describe("compare URL state", () => {
  it("reads runs, keys, grouping and the view", () => {
    expect(parse("runs=3,1,2&keys=reward/mean,eval/acc&by=optim.lr&band=stderr&smooth=0.6&log=1")).toEqual({
      runs: [3, 1, 2],
      group: null,
      keys: ["reward/mean", "eval/acc"],
      by: "optim.lr",
      band: "stderr",
      smooth: 0.6,
      log: true,
    });
  });

  it("falls back to the defaults on missing or bad values", () => {
    expect(parse("")).toEqual(DEFAULT_STATE);
    expect(parse("runs=a,0,-2,4,4,5.5&group=x&band=wide&smooth=7&log=maybe&keys=")).toEqual({
      ...DEFAULT_STATE,
      runs: [4],
      smooth: 0.99,
    });
    expect(parse("smooth=NaN").smooth).toBe(0);
    expect(parse("smooth=-1").smooth).toBe(0);
  });

  it("reads a group", () => {
    expect(parse("group=7").group).toBe(7);
  });

  it("writes only what differs from the defaults, keys readable", () => {
    expect(compareSearch(DEFAULT_STATE)).toBe("");
    expect(compareSearch({ ...DEFAULT_STATE, runs: [1, 2], keys: ["reward/mean", "time/step s"], smooth: 0.333 })).toBe(
      "runs=1,2&keys=reward/mean,time/step%20s&smooth=0.33",
    );
    // A group wins over runs: the URL is the group's.
    expect(compareSearch({ ...DEFAULT_STATE, runs: [1], group: 7, by: "optim.lr", band: "stderr", log: true })).toBe(
      "group=7&by=optim.lr&band=stderr&log=1",
    );
  });

  it("round-trips", () => {
    const state = { ...DEFAULT_STATE, runs: [9, 4], keys: ["eval/a b", "reward/mean"], by: "model.name", smooth: 0.9, log: true };
    expect(parse(compareSearch(state))).toEqual(state);
  });

  it("keeps a tag or param grouping key readable, and reads it back", () => {
    for (const by of ["tag:seed", "param:trainer/lr", "config.optim.lr"]) {
      const search = compareSearch({ ...DEFAULT_STATE, runs: [1], by });
      expect(search).toBe(`runs=1&by=${by}`);
      expect(parse(search).by).toBe(by);
    }
    expect(parse(compareSearch({ ...DEFAULT_STATE, runs: [1], by: "param:a b,c" })).by).toBe("param:a b,c");
  });

  it("builds links for other pages", () => {
    expect(compareRunsUrl([5, 6])).toBe("/compare?runs=5,6");
    expect(parseIds(" 1, 2 ,x,2")).toEqual([1, 2]);
  });
});
