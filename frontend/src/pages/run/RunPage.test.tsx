import { act, cleanup, fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { CheckpointScore, MetricKeysResponse, MetricsResponse, RunDetail, RunHumanEval } from "../../api/types";
import { errorResponse, never, runDetail, runSummary, stubApi, type Route } from "../../test/api";
import { renderPage } from "../../test/render";
import { FakeWebSocket } from "../../test/websocket";
import { checkpoint } from "../evals/testing";
import { RunPage } from "./RunPage";

// uPlot draws on a canvas, which jsdom lacks: a stand-in records what each chart was fed.
interface Zoomable {
  /** What a drag across the chart does: the x scale narrows, and uPlot calls the setScale hooks. */
  zoom(min: number, max: number): void;
}
const plots = vi.hoisted(() => ({ fed: new Map<string, unknown[][]>(), made: new Map<string, Zoomable>() }));
vi.mock("uplot", () => {
  class FakePlot {
    width = 400;
    ctx = { font: "", measureText: () => ({ width: 10 }) };
    over = document.createElement("div");
    scales: { x: { min?: number; max?: number } } = { x: {} };
    constructor(
      private readonly options: {
        series: { label?: string }[];
        hooks?: { setScale?: ((plot: FakePlot, key: string) => void)[] };
      },
      data: unknown[][],
    ) {
      this.setData(data);
      plots.made.set(String(this.options.series[1]?.label), this);
    }
    setData(data: unknown[][]): void {
      plots.fed.set(String(this.options.series[1]?.label), data);
    }
    zoom(min: number, max: number): void {
      this.scales.x = { min, max };
      for (const hook of this.options.hooks?.setScale ?? []) hook(this, "x");
    }
    setSize(): void {}
    redraw(): void {}
    destroy(): void {}
    static rangeNum(min: number, max: number): [number, number] {
      return [min, max];
    }
  }
  return { default: FakePlot };
});

const RUN = "GET /api/v1/runs/5";
const NO_HUMAN_EVAL: RunHumanEval = { eval: null, votes: 0, checkpoints: [], warning: null };

function scored(step: number, score: number, proxy_reward: number): CheckpointScore {
  const label = `grpo @ ${step}`;
  return { checkpoint: step / 100, step, label, score, ci_low: score - 40, ci_high: score + 40, rank: 1, battles: 30, proxy_reward };
}

/** The routes of everything the run page asks for; `overrides` replaces some. */
function runPageApi(overrides: Record<string, Route> = {}) {
  const keys: MetricKeysResponse = {
    keys: [{ key: "reward/mean", count: 2, first_step: 0, last_step: 1, last_value: 0.5 }],
  };
  const values = [0.25, 0.5];
  const series: MetricsResponse = {
    run: 5,
    series: [{ key: "reward/mean", count: 2, step: [0, 1], min: values, max: values, mean: values, last: values }],
  };
  return stubApi({
    [RUN]: () => runDetail(),
    "GET /api/v1/runs/5/checkpoints": () => [],
    "GET /api/v1/runs/5/metrics/keys": () => keys,
    "GET /api/v1/runs/5/metrics": () => series,
    "GET /api/v1/runs/5/samples": () => ({ count: 0, next: null, previous: null, results: [] }),
    "GET /api/v1/runs/5/artifacts": () => ({ path: "", files: [], truncated: false }),
    "GET /api/v1/runs/5/human-eval": () => NO_HUMAN_EVAL,
    ...overrides,
  });
}

function renderRun(id: string | number = 5) {
  return renderPage(<RunPage />, { path: `/runs/${id}`, route: "/runs/:id" });
}

beforeEach(() => {
  FakeWebSocket.opened = [];
  plots.fed.clear();
  vi.stubGlobal("WebSocket", FakeWebSocket);
  vi.stubGlobal(
    "ResizeObserver",
    class {
      observe(): void {}
      disconnect(): void {}
    },
  );
});

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("the run page", () => {
  it("says it is loading until the run arrives", () => {
    runPageApi({ [RUN]: never });
    renderRun();
    expect(screen.getByText("Loading run 5…")).toBeTruthy();
  });

  it("says a run that is not there is not found, with the API's message", async () => {
    runPageApi({ [RUN]: () => errorResponse(404, "not_found", "Run 5 not found.") });
    renderRun();
    expect((await screen.findByRole("alert")).textContent).toBe("Run 5 not found: Run 5 not found.");
    expect(screen.getByRole("link", { name: "← All runs" })).toBeTruthy();
  });

  it("refuses a path that is no run id, without asking the API", () => {
    const api = runPageApi();
    renderRun("latest");
    expect(screen.getByRole("alert").textContent).toBe('"latest" is not a run id.');
    expect(api.calls).toEqual([]);
  });

  it("shows a run that has reported nothing yet", async () => {
    runPageApi({
      [RUN]: () => runDetail({ status: "QUEUED", started_at: null }),
      "GET /api/v1/runs/5/metrics/keys": () => ({ keys: [] }),
    });
    renderRun();
    expect((await screen.findByTestId("run-status")).textContent).toBe("QUEUED");
    expect(await screen.findByText(/No metrics yet/)).toBeTruthy();
    for (const panel of ["charts", "samples", "checkpoints", "artifacts", "attempts", "run-failure"]) {
      expect(screen.queryByTestId(panel)).toBeNull();
    }
  });

  it("shows a queued run's reason, estimated start, place and the runs ahead, with a link to the queue", async () => {
    const at = (seconds: number) => new Date(Date.now() + seconds * 1000).toISOString();
    runPageApi({
      [RUN]: () =>
        runDetail({
          status: "QUEUED",
          started_at: null,
          waiting_for: "queued: t's quota: 1 of 1 CPU in use, this run needs 1 (2nd in t's queue)",
          queue: {
            reason: "t's quota: 1 of 1 CPU in use, this run needs 1",
            position: 2,
            ahead: [4],
            ahead_count: 1,
            demand: { CPU: 1 },
            eta: { start: at(245), low: at(185), high: at(365), estimated_at: at(-2) },
          },
        }),
      "GET /api/v1/runs/5/metrics/keys": () => ({ keys: [] }),
    });
    renderRun();
    const banner = await screen.findByTestId("run-waiting");
    expect(banner.querySelector("h2")?.textContent).toBe("Queued: waiting for admission");
    expect(screen.getByTestId("queued-reason").textContent).toBe("t's quota: 1 of 1 CPU in use, this run needs 1");
    expect(screen.getByTestId("eta").textContent).toBe("in ~4 min (3–6 min)");
    expect(screen.getByTestId("queued-place").textContent).toBe("2nd in its team's queue, after #4");
    expect(screen.getByRole("link", { name: "#4" }).getAttribute("href")).toBe("/runs/4");
    expect(screen.getByTestId("queue-link").getAttribute("href")).toBe("/teams/1/queue");
  });

  it("shows why a run failed, with its log tail", async () => {
    runPageApi({
      [RUN]: () => runDetail({ status: "FAILED", failure_reason: "OOM", log_tail: "Killed" }),
    });
    renderRun();
    expect((await screen.findByTestId("run-failure")).textContent).toContain("OOM");
    expect(screen.getByTestId("run-log-tail").textContent).toBe("Killed");
    expect(screen.queryByTestId("cancel-run")).toBeNull();
  });

  it("patches charts and status from the websocket, then refetches the run once it ends", async () => {
    let run: RunDetail = runDetail();
    const api = runPageApi({ [RUN]: () => run });
    renderRun();
    expect((await screen.findByTestId("points-reward/mean")).textContent).toBe("2");
    expect(screen.getByTestId("live-state").textContent).toBe("connecting…");

    const socket = FakeWebSocket.latest();
    expect(socket.url).toBe(`ws://${window.location.host}/ws/runs/5/`);
    socket.accept();
    await waitFor(() => expect(screen.getByTestId("live-state").textContent).toBe("live"));
    socket.send({ type: "run.snapshot", run: runSummary(), seq: 1, epoch: "e1" });

    // New points of a known key, and a key not seen before (its value non-finite).
    socket.send({
      type: "metrics.points",
      run_id: 5,
      series: [
        { key: "reward/mean", steps: [2], values: [0.75] },
        { key: "loss", steps: [2], values: ["NaN"] },
      ],
      seq: 2,
      epoch: "e1",
    });
    expect((await screen.findByTestId("points-reward/mean")).textContent).toBe("3");
    expect((await screen.findByTestId("points-loss")).textContent).toBe("1");
    expect(screen.getByTestId("chart-loss").textContent).toContain("last NaN");
    expect(plots.fed.get("mean")?.[0]).toEqual([0, 1, 2]);

    // The run ends: the status is patched at once, the detail refetched (attempts, log tail).
    run = runDetail({ status: "SUCCEEDED", finished_at: "2026-11-30T10:05:00Z" });
    socket.send({ type: "run.status", run: runSummary({ status: "SUCCEEDED" }), seq: 3, epoch: "e1" });
    await waitFor(() => expect(screen.getByTestId("run-status").textContent).toBe("SUCCEEDED"));
    expect(screen.queryByTestId("cancel-run")).toBeNull();
    await waitFor(() => expect(api.callsTo("/api/v1/runs/5")).toBe(2));
    // In order: no resync, so the series were fetched once.
    expect(api.callsTo("/api/v1/runs/5/metrics")).toBe(1);
  });

  it("smooths the charts and puts them on a log axis, and remembers the choice", async () => {
    localStorage.removeItem("barrel.chartView");
    runPageApi();
    renderRun();
    await screen.findByTestId("points-reward/mean");
    expect(plots.fed.get("mean")?.[4]).toEqual([0.25, 0.5]); // no smoothing: the mean itself
    fireEvent.change(screen.getByTestId("smoothing"), { target: { value: "0.5" } });
    // Debiased: (0.5·0.5·0.25 + 0.5·0.5) / 0.75 = 5/12 for the second point.
    await waitFor(() => expect((plots.fed.get("mean")?.[4] as number[])[1]).toBeCloseTo(5 / 12));
    expect(plots.fed.get("mean")?.[1]).toEqual([0.25, 0.5]); // the raw mean stays under it
    fireEvent.click(screen.getByTestId("log-scale"));
    expect(JSON.parse(localStorage.getItem("barrel.chartView") ?? "{}")).toEqual({ smoothing: 0.5, logScale: true, xAxis: "step" });
    cleanup();
    runPageApi();
    renderRun();
    await screen.findByTestId("points-reward/mean");
    expect((screen.getByTestId("smoothing") as HTMLInputElement).value).toBe("0.5");
    expect((screen.getByTestId("log-scale") as HTMLInputElement).checked).toBe(true);
    localStorage.removeItem("barrel.chartView");
  });

  it("asks the server for a zoomed range at full resolution and goes back on reset", async () => {
    const fine = [0.1, 0.2, 0.3];
    const api = runPageApi({
      "GET /api/v1/runs/5/metrics": (url) =>
        url.searchParams.get("start") === null
          ? { run: 5, series: [{ key: "reward/mean", count: 2, step: [0, 10], min: [0, 0], max: [1, 1], mean: [0.25, 0.5], last: [0.25, 0.5] }] }
          : { run: 5, series: [{ key: "reward/mean", count: 3, step: [2, 3, 4], min: fine, max: fine, mean: fine, last: fine }] },
    });
    renderRun();
    await screen.findByTestId("points-reward/mean");
    act(() => plots.made.get("mean")?.zoom(1.6, 4.2));
    expect((await screen.findByTestId("zoom-reward/mean")).textContent).toBe("loading…");
    await waitFor(() => expect(screen.getByTestId("zoom-reward/mean").textContent).toBe("3 pts (raw)"));
    expect(api.calls).toContain("GET /api/v1/runs/5/metrics?keys=reward%2Fmean&start=1&end=5&max_points=1000");
    expect(plots.fed.get("mean")?.[0]).toEqual([2, 3, 4]);
    fireEvent.click(screen.getByRole("button", { name: "reset zoom" }));
    expect(plots.fed.get("mean")?.[0]).toEqual([0, 10]);
    expect(screen.getByTestId("points-reward/mean").textContent).toBe("2");
  });

  it("plots against relative time: reads the times, places live points and zooms by the steps of the dragged time", async () => {
    localStorage.removeItem("barrel.chartView");
    const T0 = 1_764_504_000;
    const api = runPageApi({
      "GET /api/v1/runs/5/metrics": (url) => {
        const times = url.searchParams.get("times") === "1";
        const wire = (step: number[], time: number[], mean: number[]) => ({
          key: "reward/mean",
          count: step.length,
          step,
          min: mean,
          max: mean,
          mean,
          last: mean,
          ...(times ? { time } : {}),
        });
        return url.searchParams.get("start") === null
          ? { run: 5, series: [wire([0, 10, 20], [T0, T0 + 60, T0 + 600], [0.25, 0.5, 0.75])] }
          : { run: 5, series: [wire([11, 12], [T0 + 100, T0 + 200], [0.6, 0.7])] };
      },
    });
    renderRun();
    await screen.findByTestId("points-reward/mean");
    expect(plots.fed.get("mean")?.[0]).toEqual([0, 10, 20]);
    fireEvent.change(screen.getByTestId("x-axis"), { target: { value: "relative" } });
    // Read again with times; x is seconds since the run's first point.
    await waitFor(() => expect(plots.fed.get("mean")?.[0]).toEqual([0, 60, 600]));
    expect(api.calls).toContain("GET /api/v1/runs/5/metrics?keys=reward%2Fmean&max_points=1000&times=1");
    expect(JSON.parse(localStorage.getItem("barrel.chartView") ?? "{}")).toEqual({ smoothing: 0, logScale: false, xAxis: "relative" });

    // A live point lands at its own time.
    const socket = FakeWebSocket.latest();
    socket.accept();
    socket.send({ type: "run.snapshot", run: runSummary(), seq: 1, epoch: "e1" });
    socket.send({
      type: "metrics.points",
      run_id: 5,
      series: [{ key: "reward/mean", steps: [30], values: [1], times: [T0 + 900] }],
      seq: 2,
      epoch: "e1",
    });
    await waitFor(() => expect(plots.fed.get("mean")?.[0]).toEqual([0, 60, 600, 900]));

    // Dragging 90 s .. 300 s asks for the steps of the points either side: 10 .. 20.
    act(() => plots.made.get("mean")?.zoom(90, 300));
    await waitFor(() => expect(screen.getByTestId("zoom-reward/mean").textContent).toBe("2 pts (raw)"));
    expect(api.calls).toContain("GET /api/v1/runs/5/metrics?keys=reward%2Fmean&start=10&end=20&max_points=1000&times=1");
    expect(plots.fed.get("mean")?.[0]).toEqual([100, 200]);
    localStorage.removeItem("barrel.chartView");
  });

  it("pins a chart to the top for the project's runs, folds a namespace, and draws the reward distribution", async () => {
    localStorage.removeItem("barrel.chartLayout.1");
    const keys = ["reward/mean", "reward/min", "reward/max"];
    const wire = (key: string) => ({ key, count: 2, step: [0, 1], min: [0.1, 0.2], max: [0.3, 0.4], mean: [0.2, 0.3], last: [0.2, 0.3] });
    runPageApi({
      "GET /api/v1/runs/5/metrics/keys": () => ({
        keys: keys.map((key) => ({ key, count: 2, first_step: 0, last_step: 1, last_value: 0.3 })),
      }),
      "GET /api/v1/runs/5/metrics": () => ({ run: 5, series: keys.map(wire) }),
    });
    renderRun();
    expect(await screen.findByTestId("distribution-reward")).toBeTruthy();
    expect(screen.queryByTestId("pinned-charts")).toBeNull();
    fireEvent.click(screen.getByRole("button", { name: "pin reward/max" }));
    expect(screen.getByTestId("pinned-charts").textContent).toContain("reward/max");
    fireEvent.click(screen.getByTestId("fold-reward"));
    expect(screen.queryByTestId("distribution-reward")).toBeNull();
    expect(JSON.parse(localStorage.getItem("barrel.chartLayout.1") ?? "null")).toEqual({ pinned: ["reward/max"], folded: ["reward"] });
    // Another run of the project opens with the same layout.
    cleanup();
    runPageApi();
    renderRun();
    await screen.findByTestId("charts");
    expect(screen.getByTestId("fold-reward").getAttribute("aria-expanded")).toBe("false");
    localStorage.removeItem("barrel.chartLayout.1");
  });

  it("marks checkpoints on the charts", async () => {
    runPageApi({
      "GET /api/v1/runs/5/checkpoints": () => [
        { id: 1, run: 5, attempt: null, step: 4, uri: "file:///c/4", weight_version: 4, metrics: {}, created_at: "2026-11-30T10:00:09Z", score: null },
      ],
    });
    renderRun();
    expect(await screen.findByText(/Dashed lines: checkpoints/)).toBeTruthy();
  });

  it("marks the step a link points at, and clears it keeping the rest of the query", async () => {
    runPageApi();
    renderPage(<RunPage />, { path: "/runs/5?step=40&tab=x", route: "/runs/:id" });
    const notice = await screen.findByTestId("step-focus");
    expect(notice.textContent).toContain("Step 40 is marked (solid pink line) on each chart whose steps reach it.");
    const clear = screen.getByRole("link", { name: "Clear the mark at step 40" });
    expect(clear.getAttribute("href")).toBe("/runs/5?tab=x");
    fireEvent.click(clear);
    await waitFor(() => expect(screen.queryByTestId("step-focus")).toBeNull());
    expect(screen.getByTestId("charts")).toBeTruthy();
  });

  it("ignores a ?step= that is no step", async () => {
    runPageApi();
    renderPage(<RunPage />, { path: "/runs/5?step=abc", route: "/runs/:id" });
    await screen.findByTestId("charts");
    expect(screen.queryByTestId("step-focus")).toBeNull();
  });

  it("refetches what it missed when the event counter jumps", async () => {
    const api = runPageApi();
    renderRun();
    expect((await screen.findByTestId("points-reward/mean")).textContent).toBe("2");
    const socket = FakeWebSocket.latest();
    socket.accept();
    socket.send({ type: "run.snapshot", run: runSummary(), seq: 1, epoch: "e1" });
    socket.send({ type: "samples.added", run_id: 5, count: 1, steps: [3], seq: 4, epoch: "e1" });
    await waitFor(() => expect(api.callsTo("/api/v1/runs/5/metrics")).toBe(2));
    expect(api.callsTo("/api/v1/runs/5")).toBe(2);
  });

  it("stops and says so when the server closes the feed as not found", async () => {
    runPageApi();
    renderRun();
    await screen.findByTestId("run-status");
    const socket = FakeWebSocket.latest();
    socket.drop(4404);
    await waitFor(() => expect(screen.getByTestId("live-state").textContent).toBe("no live feed"));
    expect(FakeWebSocket.opened).toHaveLength(1);
  });

  it("closes its socket when the page goes away", async () => {
    runPageApi();
    const page = renderRun();
    await screen.findByTestId("run-status");
    page.unmount();
    expect(FakeWebSocket.latest().closedWith).toBe(1000);
  });

  it("draws the human score beside the reward and warns when the reward rose as people's score fell", async () => {
    const checkpoints = [scored(100, 1080, 0.2), scored(200, 1000, 0.5), scored(300, 920, 0.8)];
    const [earlier, , later] = checkpoints as [CheckpointScore, CheckpointScore, CheckpointScore];
    const message = "Possible reward hacking: the proxy reward rose by 0.6 from grpo @ 100 (step 100) to grpo @ 300 (step 300)";
    runPageApi({
      "GET /api/v1/runs/5/human-eval": () =>
        ({
          eval: { id: 7, name: "sums", status: "OPEN" },
          votes: 90,
          checkpoints,
          warning: { earlier, later, score_drop: 160, drop_low: 60, drop_high: 260, reward_rise: 0.6, pairs: 3, message },
        }) satisfies RunHumanEval,
    });
    renderRun();
    const panel = await screen.findByTestId("human-eval");
    expect(panel.textContent).toContain("sums");
    expect(screen.getByRole("link", { name: "sums" }).getAttribute("href")).toBe("/evals/7");
    expect(screen.getByTestId("hacking-warning").textContent).toContain(message);
    const rows = [...screen.getByTestId("human-table").querySelectorAll("tbody tr")];
    expect(rows.map((r) => r.className)).toEqual(["flagged", "", "flagged"]);
    expect(rows[0]?.textContent).toContain("1080 [1040, 1120]");
    // One step axis: the reward's steps and the checkpoints' (the score only at checkpoints).
    await waitFor(() => expect(plots.fed.get("human score")?.[0]).toEqual([0, 1, 100, 200, 300]));
    const [, score, low, high, reward] = plots.fed.get("human score") ?? [];
    expect(score).toEqual([null, null, 1080, 1000, 920]);
    expect(low).toEqual([null, null, 1040, 960, 880]);
    expect(high).toEqual([null, null, 1120, 1040, 960]);
    expect(reward).toEqual([0.25, 0.5, null, null, null]);
  });

  it("shows no human score where no eval has ranked the run's checkpoints", async () => {
    const api = runPageApi();
    renderRun();
    await screen.findByTestId("charts");
    await waitFor(() => expect(api.callsTo("/api/v1/runs/5/human-eval")).toBe(1));
    expect(screen.queryByTestId("human-eval")).toBeNull();
  });

  it("links each checkpoint to a chat with it", async () => {
    runPageApi({ "GET /api/v1/runs/5/checkpoints": () => [checkpoint(41, 5, 100), checkpoint(42, 5, 200)] });
    renderRun();
    const link = await screen.findByTestId("chat-200");
    expect(link.getAttribute("href")).toBe("/chat?checkpoint=42");
    expect(screen.getByTestId("chat-100").getAttribute("href")).toBe("/chat?checkpoint=41");
  });
});
