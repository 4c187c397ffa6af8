import { QueryClient } from "@tanstack/react-query";
import { describe, expect, it } from "vitest";

import { liveBufferFor, type SeriesByKey } from "../../api/metrics";
import { queryKeys } from "../../api/queryKeys";
import type { MetricKeysResponse, RunDetail, RunPage, RunSummary, SamplePage } from "../../api/types";
import { applyRunMessage, parseMessage, ReconnectBackoff, runSocketUrl, SeqTracker } from "./live";

function summary(id: number, status: RunSummary["status"]): RunSummary {
  return {
    id,
    name: `run-${id}`,
    recipe: "smoke",
    status,
    tags: [],
    project: {
      id: 1,
      name: "p",
      description: "",
      team: { id: 1, slug: "t", name: "T" },
      created_at: "2025-01-01T00:00:00Z",
    },
    created_by: "demo",
    created_at: "2025-01-01T00:00:00Z",
    updated_at: "2025-01-01T00:00:00Z",
    started_at: null,
    finished_at: null,
    failure_reason: "",
    earlier_attempts_s: 0,
    waiting_for: "",
    waiting_since: null,
    priority: 0,
    queue: {},
    groups: [],
  };
}

function detail(id: number, status: RunSummary["status"]): RunDetail {
  return { ...summary(id, status), config: { steps: 3 }, params: {}, log_tail: "", cloned_from: null, attempts: [] };
}

function client(): QueryClient {
  // No retries or background work: these tests only read and patch the cache.
  return new QueryClient({ defaultOptions: { queries: { retry: false, staleTime: Number.POSITIVE_INFINITY } } });
}

describe("runSocketUrl", () => {
  it("follows the page's scheme", () => {
    expect(runSocketUrl(12, { protocol: "http:", host: "localhost:8000" })).toBe("ws://localhost:8000/ws/runs/12/");
    expect(runSocketUrl(12, { protocol: "https:", host: "barrel.example" })).toBe("wss://barrel.example/ws/runs/12/");
  });
});

describe("parseMessage", () => {
  it("accepts typed JSON objects only", () => {
    expect(parseMessage('{"type":"resync"}')).toEqual({ type: "resync" });
    expect(parseMessage("not json")).toBeNull();
    expect(parseMessage('{"no":"type"}')).toBeNull();
    expect(parseMessage(new ArrayBuffer(2))).toBeNull();
  });
});

describe("applyRunMessage", () => {
  it("appends metric points to the cached series and creates series for new keys", () => {
    const qc = client();
    const runId = 101;
    const before: SeriesByKey = {
      "reward/mean": { key: "reward/mean", count: 1, step: [1], min: [0.1], max: [0.1], mean: [0.1], last: [0.1] },
    };
    qc.setQueryData(queryKeys.metricSeries(runId), before);
    qc.setQueryData<MetricKeysResponse>(queryKeys.metricKeys(runId), {
      keys: [{ key: "reward/mean", count: 1, first_step: 1, last_step: 1, last_value: 0.1 }],
    });

    applyRunMessage(qc, runId, {
      type: "metrics.points",
      run_id: runId,
      series: [
        { key: "reward/mean", steps: [2], values: [0.2] },
        { key: "policy/loss", steps: [2], values: ["NaN"] },
      ],
    });

    const after = qc.getQueryData<SeriesByKey>(queryKeys.metricSeries(runId));
    expect(after?.["reward/mean"]?.step).toEqual([1, 2]);
    expect(after?.["policy/loss"]?.step).toEqual([2]);
    expect(after?.["policy/loss"]?.mean[0]).toBeNaN();
    const keys = qc.getQueryData<MetricKeysResponse>(queryKeys.metricKeys(runId))?.keys;
    expect(keys?.map((k) => k.key)).toEqual(["reward/mean", "policy/loss"]);
    expect(keys?.[0]).toMatchObject({ last_step: 2, last_value: 0.2 });
    expect(keys?.[1]).toMatchObject({ last_value: "NaN" });
  });

  it("ignores points of another run", () => {
    const qc = client();
    qc.setQueryData<SeriesByKey>(queryKeys.metricSeries(1), {});
    applyRunMessage(qc, 1, { type: "metrics.points", run_id: 2, series: [{ key: "k", steps: [1], values: [1] }] });
    expect(qc.getQueryData(queryKeys.metricSeries(1))).toEqual({});
  });

  it("buffers points that arrive before the first fetch lands", () => {
    const qc = client();
    const runId = 102;
    applyRunMessage(qc, runId, { type: "metrics.points", run_id: runId, series: [{ key: "k", steps: [7], values: [1] }] }, 5);
    expect(qc.getQueryData(queryKeys.metricSeries(runId))).toBeUndefined();
    expect(liveBufferFor(runId).since(5)).toEqual([{ key: "k", step: 7, value: 1 }]);
  });

  it("patches the run detail and the runs lists on a status change", () => {
    const qc = client();
    qc.setQueryData(queryKeys.runDetail(5), detail(5, "RUNNING"));
    const listKey = queryKeys.runList({ limit: 50, offset: 0 });
    qc.setQueryData<RunPage>(listKey, {
      count: 2,
      next: null,
      previous: null,
      results: [summary(6, "QUEUED"), summary(5, "RUNNING")],
    });
    const untouched = qc.getQueryData<RunPage>(listKey)?.results[0];
    // An entry under ["runs"] that holds no runs (the runs table's metric keys) is left alone.
    const keysKey = [...queryKeys.runLists, "table-keys", {}];
    qc.setQueryData(keysKey, { keys: [{ key: "loss", runs: 1 }] });

    applyRunMessage(qc, 5, { type: "run.status", run: { ...summary(5, "FAILED"), failure_reason: "OOM" } });
    expect(qc.getQueryData(keysKey)).toEqual({ keys: [{ key: "loss", runs: 1 }] });

    const run = qc.getQueryData<RunDetail>(queryKeys.runDetail(5));
    expect(run?.status).toBe("FAILED");
    expect(run?.failure_reason).toBe("OOM");
    expect(run?.config).toEqual({ steps: 3 }); // detail-only fields survive
    expect(qc.getQueryState(queryKeys.runDetail(5))?.isInvalidated).toBe(true); // attempts and log_tail refetch
    const list = qc.getQueryData<RunPage>(listKey);
    expect(list?.results[1]?.status).toBe("FAILED");
    expect(list?.results[0]).toBe(untouched);
  });

  it("invalidates everything about the run on resync", () => {
    const qc = client();
    qc.setQueryData(queryKeys.runDetail(9), detail(9, "RUNNING"));
    qc.setQueryData<SeriesByKey>(queryKeys.metricSeries(9), {});
    qc.setQueryData(queryKeys.runDetail(10), detail(10, "RUNNING"));
    applyRunMessage(qc, 9, { type: "resync" });
    expect(qc.getQueryState(queryKeys.runDetail(9))?.isInvalidated).toBe(true);
    expect(qc.getQueryState(queryKeys.metricSeries(9))?.isInvalidated).toBe(true);
    expect(qc.getQueryState(queryKeys.runDetail(10))?.isInvalidated).toBe(false);
  });
});

describe("SeqTracker", () => {
  const points = (seq: number) => ({ type: "metrics.points" as const, run_id: 1, series: [], seq });

  it("starts from the snapshot's seq and sees no gap in a consecutive stream", () => {
    const tracker = new SeqTracker();
    expect(tracker.missed({ type: "run.snapshot", run: summary(1, "RUNNING"), seq: 40 })).toBe(false);
    expect([41, 42, 43].map((seq) => tracker.missed(points(seq)))).toEqual([false, false, false]);
  });

  it("reports a jump, once, and takes a late older event calmly", () => {
    const tracker = new SeqTracker();
    tracker.missed({ type: "run.snapshot", run: summary(1, "RUNNING"), seq: 5 });
    expect(tracker.missed(points(8))).toBe(true);
    expect(tracker.missed(points(7))).toBe(false);
    expect(tracker.missed(points(9))).toBe(false);
  });

  it("ignores messages without a seq and the resync message itself", () => {
    const tracker = new SeqTracker();
    expect(tracker.missed({ type: "resync" })).toBe(false);
    expect(tracker.missed({ type: "metrics.points", run_id: 1, series: [] })).toBe(false);
    expect(tracker.missed(points(3))).toBe(false);
    expect(tracker.missed(points(4))).toBe(false);
  });

  it("a missed event leads to a refetch of everything about the run", () => {
    const qc = client();
    qc.setQueryData(queryKeys.runDetail(11), detail(11, "RUNNING"));
    qc.setQueryData<SeriesByKey>(queryKeys.metricSeries(11), {});
    const tracker = new SeqTracker();
    for (const message of [{ type: "run.snapshot" as const, run: summary(11, "RUNNING"), seq: 1 }, points(2), points(4)]) {
      const withRun = message.type === "metrics.points" ? { ...message, run_id: 11 } : message;
      if (tracker.missed(withRun)) applyRunMessage(qc, 11, { type: "resync" });
      applyRunMessage(qc, 11, withRun);
    }
    expect(qc.getQueryState(queryKeys.metricSeries(11))?.isInvalidated).toBe(true);
    expect(qc.getQueryState(queryKeys.runDetail(11))?.isInvalidated).toBe(true);
  });
});

describe("samples and checkpoints events", () => {
  it("invalidate exactly the run's samples or checkpoints, and ignore other runs", () => {
    const qc = client();
    qc.setQueryData<SamplePage>(queryKeys.samples(5), { count: 0, next: null, previous: null, results: [] });
    qc.setQueryData(queryKeys.checkpoints(5), []);
    qc.setQueryData(queryKeys.runDetail(5), detail(5, "RUNNING"));
    applyRunMessage(qc, 5, { type: "samples.added", run_id: 6, count: 2, steps: [3] });
    expect(qc.getQueryState(queryKeys.samples(5))?.isInvalidated).toBe(false);
    applyRunMessage(qc, 5, { type: "samples.added", run_id: 5, count: 2, steps: [3] });
    expect(qc.getQueryState(queryKeys.samples(5))?.isInvalidated).toBe(true);
    expect(qc.getQueryState(queryKeys.checkpoints(5))?.isInvalidated).toBe(false);
    applyRunMessage(qc, 5, { type: "checkpoint.registered", run_id: 5, checkpoint: { id: 1, step: 10, uri: "file:///c" } });
    expect(qc.getQueryState(queryKeys.checkpoints(5))?.isInvalidated).toBe(true);
    expect(qc.getQueryState(queryKeys.runDetail(5))?.isInvalidated).toBe(false);
  });
});

describe("epochs", () => {
  const points = (seq: number, epoch: string) => ({ type: "metrics.points" as const, run_id: 1, series: [], seq, epoch });

  it("reads a counter that started again under a new epoch as a resync, not as old news or a gap", () => {
    const tracker = new SeqTracker();
    expect(tracker.observe({ type: "run.snapshot", run: summary(1, "RUNNING"), seq: 40, epoch: "a" })).toBe("in-order");
    expect(tracker.observe(points(41, "a"))).toBe("in-order");
    // Redis restarted: seq 1 would otherwise pass as a late event and hide the next real gap.
    expect(tracker.observe(points(1, "b"))).toBe("new-epoch");
    expect(tracker.observe(points(2, "b"))).toBe("in-order");
    expect(tracker.observe(points(4, "b"))).toBe("gap");
  });

  it("a new epoch leads to a refetch of everything about the run", () => {
    const qc = client();
    qc.setQueryData(queryKeys.runDetail(12), detail(12, "RUNNING"));
    const tracker = new SeqTracker();
    tracker.observe({ type: "run.snapshot", run: summary(12, "RUNNING"), seq: 7, epoch: "a" });
    expect(qc.getQueryState(queryKeys.runDetail(12))?.isInvalidated).toBe(false);
    if (tracker.missed({ ...points(1, "b"), run_id: 12 })) applyRunMessage(qc, 12, { type: "resync" });
    expect(qc.getQueryState(queryKeys.runDetail(12))?.isInvalidated).toBe(true);
  });
});

describe("ReconnectBackoff", () => {
  it("keeps growing while the server closes before its snapshot, and starts again after one", () => {
    const backoff = new ReconnectBackoff();
    // Each attempt is accepted and closed at once with 1013 (Redis down): no snapshot.
    expect([1, 2, 3, 4, 5, 6, 7].map(() => backoff.nextDelayMs())).toEqual([
      1000, 2000, 4000, 8000, 16000, 30000, 30000,
    ]);
    backoff.established(); // a snapshot arrived: the feed works again
    expect(backoff.nextDelayMs()).toBe(1000);
  });
});
