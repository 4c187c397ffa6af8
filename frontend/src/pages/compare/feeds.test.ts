import { describe, expect, it } from "vitest";

import { describeFeed, flushIntervalMs, liveRuns, MAX_LIVE_RUNS, messageRun, runsSocketUrl } from "./feeds";

describe("the live feed", () => {
  it("follows only running runs, at most MAX_LIVE_RUNS", () => {
    const runs = Array.from({ length: 160 }, (_, i) => ({ id: i + 1, status: i % 3 === 0 ? "SUCCEEDED" : "RUNNING" }));
    const { fed, running } = liveRuns(runs);
    expect(running).toBe(106);
    expect(fed).toHaveLength(MAX_LIVE_RUNS);
    expect(fed).not.toContain(1);
    expect(liveRuns([{ id: 1, status: "FAILED" }])).toEqual({ fed: [], running: 0 });
  });

  it("opens one socket for every followed run", () => {
    expect(runsSocketUrl([3, 5], { protocol: "https:", host: "barrel.lab" })).toBe("wss://barrel.lab/ws/runs/?ids=3,5");
  });

  it("tells which run a message is about, and a resync of them all", () => {
    expect(messageRun({ type: "metrics.points", run_id: 4, series: [] })).toBe(4);
    expect(messageRun({ type: "resync", run_id: 4 })).toBe(4);
    expect(messageRun({ type: "resync" })).toBeNull();
  });

  it("says how the feed is doing, and that some runs are not followed", () => {
    expect(describeFeed("up", 2, 2)).toEqual({ text: "live: 2 running runs", tone: "up" });
    expect(describeFeed("closed", 2, 2)).toEqual({ text: "live feed reconnecting…", tone: "closed" });
    expect(describeFeed("connecting", 1, 1).text).toBe("connecting the live feed of 1 run…");
    expect(describeFeed("refused", 1, 1)).toEqual({ text: "no live feed", tone: "refused" });
    expect(describeFeed("up", 100, 125).text).toBe("live: 100 running runs (the first 100 of 125 running runs)");
  });

  it("applies live points less often the more runs it follows, between 200 ms and a second", () => {
    expect(flushIntervalMs(1)).toBe(200);
    expect(flushIntervalMs(20)).toBe(200);
    expect(flushIntervalMs(50)).toBe(500);
    expect(flushIntervalMs(100)).toBe(1000);
    expect(flushIntervalMs(MAX_LIVE_RUNS * 3)).toBe(1000);
  });
});
