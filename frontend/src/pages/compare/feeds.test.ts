import { describe, expect, it } from "vitest";

import { describeFeeds, liveRuns, MAX_LIVE_FEEDS } from "./feeds";

describe("live feeds", () => {
  it("follows only running runs, at most MAX_LIVE_FEEDS", () => {
    const runs = Array.from({ length: 30 }, (_, i) => ({ id: i + 1, status: i % 3 === 0 ? "SUCCEEDED" : "RUNNING" }));
    const { fed, running } = liveRuns(runs);
    expect(running).toBe(20);
    expect(fed).toHaveLength(Math.min(20, MAX_LIVE_FEEDS));
    expect(fed).not.toContain(1);
    expect(liveRuns([{ id: 1, status: "FAILED" }])).toEqual({ fed: [], running: 0 });
  });

  it("says how the feeds are doing, and that some runs are not followed", () => {
    expect(describeFeeds(["up", "up"], 2)).toEqual({ text: "live: 2 running runs", tone: "up" });
    expect(describeFeeds(["up", "closed"], 2).tone).toBe("closed");
    expect(describeFeeds(["up", "closed"], 2).text).toBe("1 of 2 live feeds reconnecting…");
    expect(describeFeeds(["up", "connecting"], 2).text).toBe("connecting 1 of 2 live feeds…");
    expect(describeFeeds(["refused"], 1)).toEqual({ text: "no live feed", tone: "refused" });
    expect(describeFeeds(["up", "refused"], 2).text).toBe("live: 1 running run, 1 without a feed");
    expect(describeFeeds(["up"], 25).text).toBe("live: 1 running run (the first 1 of 25 running runs)");
  });
});
