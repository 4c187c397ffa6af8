import { cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { MetricKeysResponse, RunDetail } from "../../api/types";
import { errorResponse, never, runDetail, runSummary, stubApi, type Route } from "../../test/api";
import { renderPage } from "../../test/render";
import { FakeWebSocket } from "../../test/websocket";
import { sentBodies } from "../evals/testing";
import type { MetricsQueryRequest, RunMetricSeriesWire } from "./api";
import { ComparePage } from "./ComparePage";

interface FakeSeries {
  show: boolean;
  alpha?: number;
  width?: number;
}

interface FakeOptions {
  series: { show?: boolean }[];
  axes: { label?: string }[];
  hooks: { setSelect: ((u: unknown) => void)[] };
  cursor: {
    bind: {
      mousedown: (u: unknown, t: unknown, h: (e: MouseEvent) => null) => (e: MouseEvent) => null;
      dblclick: (u: unknown, t: unknown, h: (e: MouseEvent) => null) => (e: MouseEvent) => null;
    };
  };
}

interface Plot {
  options: FakeOptions;
  data: unknown[][];
  series: FakeSeries[];
  select: { left: number; top: number; width: number; height: number };
  scales: Record<string, unknown>;
  destroyed: boolean;
  draws: number;
}

// uPlot draws on a canvas, which jsdom lacks: a stand-in records what each chart was fed and told.
const plots = vi.hoisted(() => ({ made: [] as Plot[] }));
vi.mock("uplot", () => {
  class FakePlot {
    width = 400;
    ctx = { font: "", measureText: () => ({ width: 10 }) };
    over = document.createElement("div");
    data: unknown[][] = [];
    series: FakeSeries[];
    select = { left: 0, top: 0, width: 0, height: 0 };
    scales: Record<string, unknown> = {};
    cursor = { idx: null, idxs: [] };
    destroyed = false;
    constructor(
      readonly options: FakeOptions,
      data: unknown[][],
    ) {
      this.series = options.series.map((s) => ({ show: s.show ?? true }));
      plots.made.push(this as unknown as Plot);
      this.setData(data);
    }
    /** setData and redraw calls: what a real chart would draw. */
    draws = 0;
    setData(data: unknown[][]): void {
      this.data = data;
      this.draws += 1;
    }
    setScale(key: string, range: unknown): void {
      this.scales[key] = range;
    }
    setSeries(i: number, opts: { show?: boolean }): void {
      const s = this.series[i];
      if (s && opts.show !== undefined) s.show = opts.show;
    }
    setSelect(select: { left: number; top: number; width: number; height: number }): void {
      this.select = select;
    }
    posToVal(px: number): number {
      return px;
    }
    batch(fn: () => void): void {
      fn();
    }
    redraw(): void {
      this.draws += 1;
    }
    setSize(): void {}
    destroy(): void {
      this.destroyed = true;
    }
    static rangeNum(min: number, max: number): [number, number] {
      return [min, max];
    }
  }
  return { default: FakePlot };
});

/** Steps a chart was last fed. */
function steps(plot: Plot): number[] {
  return Array.from((plot.data[0] ?? []) as ArrayLike<number>);
}

/** The live chart of a key (the newest one made for it that is not destroyed). */
function chart(key: string): Plot {
  const found = plots.made.filter((p) => p.options.axes[1]?.label === key && !p.destroyed).at(-1);
  if (!found) throw new Error(`no chart for ${key}`);
  return found;
}

const RUNS: Record<number, RunDetail> = {
  1: runDetail({ id: 1, name: "pace lr small seed 0", status: "SUCCEEDED", config: { optim: { lr: 1e-6 }, seed: 0 } }),
  2: runDetail({ id: 2, name: "pace lr small seed 1", status: "SUCCEEDED", config: { optim: { lr: 1e-6 }, seed: 1 } }),
  3: runDetail({ id: 3, name: "pace lr big seed 0", status: "SUCCEEDED", config: { optim: { lr: 3e-6 }, seed: 0 } }),
};

const KEYS: Record<number, string[]> = { 1: ["reward/mean", "eval/acc"], 2: ["reward/mean", "eval/acc"], 3: ["reward/mean"] };

function keysOf(run: number): MetricKeysResponse {
  return { keys: (KEYS[run] ?? []).map((key) => ({ key, count: 3, first_step: 0, last_step: 2, last_value: 0 })) };
}

function wire(run: number, key: string, step: number[], values: number[]): RunMetricSeriesWire {
  return { run, key, count: step.length, step, min: values, max: values, mean: values, last: values };
}

/** Every run's series of every key it has: reward/mean rises to 0.5 + run / 10. */
function allSeries(): RunMetricSeriesWire[] {
  return [1, 2, 3].flatMap((run) =>
    (KEYS[run] ?? []).map((key) => wire(run, key, [0, 1, 2], [0.1, 0.3, key === "reward/mean" ? 0.5 + run / 10 : 0.9])),
  );
}

function compareApi(overrides: Record<string, Route> = {}) {
  const routes: Record<string, Route> = {
    "POST /api/v1/metrics/query": () => ({ series: allSeries() }),
    "GET /api/v1/runs": () => ({ count: 3, next: null, previous: null, results: [1, 2, 3].map((id) => RUNS[id]) }),
    "GET /api/v1/runs/3/checkpoints": () => [],
  };
  for (const id of [1, 2, 3]) {
    routes[`GET /api/v1/runs/${id}`] = () => RUNS[id];
    routes[`GET /api/v1/runs/${id}/metrics/keys`] = () => keysOf(id);
  }
  const all = { ...routes, ...overrides };
  // The runs as their own routes answer them: all of them, or 404 when one is refused.
  all["POST /api/v1/compare/runs"] ??= async (url) => {
    const asked = bulkBodies().at(-1)?.runs ?? [];
    const runs = [];
    for (const id of asked) {
      const detail = await all[`GET /api/v1/runs/${id}`]?.(url);
      const keys = await all[`GET /api/v1/runs/${id}/metrics/keys`]?.(url);
      if (!detail || !keys || detail instanceof Response || keys instanceof Response) {
        return errorResponse(404, "not_found", `Runs not found: ${id} (no such run, or not in a team of yours).`);
      }
      runs.push({ run: detail, keys: (keys as MetricKeysResponse).keys });
    }
    return { runs };
  };
  return stubApi(all);
}

function bulkBodies(): { runs: number[] }[] {
  return sentBodies(vi.mocked(fetch).mock.calls, "POST", "/api/v1/compare/runs") as { runs: number[] }[];
}

function renderCompare(search: string) {
  return renderPage(<ComparePage />, { path: `/compare${search}`, route: "/compare" });
}

function queryBodies(): MetricsQueryRequest[] {
  return sentBodies(vi.mocked(fetch).mock.calls, "POST", "/api/v1/metrics/query") as MetricsQueryRequest[];
}

beforeEach(() => {
  plots.made = [];
  FakeWebSocket.opened = [];
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

describe("the compare page", () => {
  it("offers a run picker when no runs are chosen", async () => {
    const api = compareApi();
    renderCompare("");
    expect(screen.getByTestId("compare-empty").textContent).toContain("Choose runs to overlay");
    const submit = screen.getByTestId("pick-submit") as HTMLButtonElement;
    expect(submit.disabled).toBe(true);
    fireEvent.click(await screen.findByRole("checkbox", { name: "Compare run 3 pace lr big seed 0" }));
    fireEvent.click(screen.getByRole("checkbox", { name: "Compare run 1 pace lr small seed 0" }));
    fireEvent.click(submit);
    // The picked runs, in the order picked, are compared: their details are asked for, at once.
    await waitFor(() => expect(api.callsTo("/api/v1/compare/runs")).toBe(1));
    expect(bulkBodies()).toEqual([{ runs: [3, 1] }]);
    expect(await screen.findByTestId("compare-chart-reward/mean")).toBeTruthy();
    expect(queryBodies()[0]?.runs).toEqual([3, 1]);
    expect(api.callsTo("/api/v1/runs/3") + api.callsTo("/api/v1/runs/3/metrics/keys")).toBe(0);
  });

  it("says it is loading until the runs arrive", () => {
    compareApi({ "GET /api/v1/runs/1": never });
    renderCompare("?runs=1");
    expect(screen.getByTestId("compare-loading").textContent).toMatch(/Loading runs… \(0 of 1\)/);
  });

  it("says when no run can be loaded", async () => {
    compareApi({ "GET /api/v1/runs/1": () => errorResponse(404, "not_found", "Run 1 not found.") });
    renderCompare("?runs=1");
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toContain("Cannot load the runs #1");
    expect(alert.textContent).toContain("Run 1 not found.");
    expect(screen.queryByTestId("compare-charts")).toBeNull();
  });

  it("leaves out a run it cannot load, names it, and compares the others", async () => {
    const api = compareApi({ "GET /api/v1/runs/2": () => errorResponse(404, "not_found", "Run 2 not found.") });
    renderCompare("?runs=1,2,3");
    expect((await screen.findByRole("alert")).textContent).toContain("Left out #2");
    // The bulk read was refused as a whole; each run was then asked for alone.
    expect(api.callsTo("/api/v1/compare/runs")).toBe(1);
    expect(api.callsTo("/api/v1/runs/1")).toBe(1);
    await screen.findByTestId("compare-chart-reward/mean");
    expect(queryBodies()[0]?.runs).toEqual([1, 3]);
    expect(screen.getAllByTestId("legend-entry")).toHaveLength(2);
  });

  it("overlays the runs with one legend, and says which runs lack a chosen metric", async () => {
    compareApi();
    renderCompare("?runs=1,3&keys=reward/mean,eval/acc");
    await waitFor(() => expect(steps(chart("eval/acc"))).toHaveLength(3));
    expect(queryBodies()).toEqual([{ runs: [1, 3], keys: ["reward/mean", "eval/acc"], max_points: 1000 }]);
    // [steps, run 1, run 3]; run 3 never logged eval/acc.
    expect(chart("eval/acc").data[2]).toEqual([undefined, undefined, undefined]);
    expect(within(screen.getByTestId("compare-chart-eval/acc")).getByTestId("chart-missing").textContent).toBe(
      "1 of 2 runs report it",
    );
    expect(within(screen.getByTestId("compare-chart-reward/mean")).queryByTestId("chart-missing")).toBeNull();
    const labels = screen.getAllByTestId("legend-label").map((l) => l.textContent);
    expect(labels).toEqual(["pace lr small seed 0 #1", "pace lr big seed 0 #3"]);
  });

  it("charts the keys every run has by default, reward/ first", async () => {
    compareApi();
    renderCompare("?runs=1,2");
    await waitFor(() => expect(queryBodies()).toHaveLength(1));
    expect(queryBodies()[0]?.keys).toEqual(["reward/mean", "eval/acc"]);
    expect(screen.getByTestId("key-picker").textContent).toContain("2 charted of 2");
  });

  it("hides, isolates and highlights runs on every chart from the legend", async () => {
    compareApi();
    renderCompare("?runs=1,2,3");
    await waitFor(() => expect(steps(chart("reward/mean"))).toHaveLength(3));
    const entries = screen.getAllByTestId("legend-entry");
    fireEvent.click(within(entries[1] as HTMLElement).getAllByRole("button")[0] as HTMLElement);
    expect(chart("reward/mean").series.map((s) => s.show)).toEqual([true, true, false, true]);
    fireEvent.click(within(entries[2] as HTMLElement).getByRole("button", { name: "Show only pace lr big seed 0" }));
    expect(chart("reward/mean").series.map((s) => s.show)).toEqual([true, false, false, true]);
    fireEvent.click(screen.getByRole("button", { name: /show all/ }));
    expect(chart("reward/mean").series.map((s) => s.show)).toEqual([true, true, true, true]);

    fireEvent.mouseEnter(entries[0] as HTMLElement);
    expect(chart("reward/mean").series.slice(1).map((s) => s.alpha)).toEqual([1, 0.12, 0.12]);
    fireEvent.mouseLeave(entries[0] as HTMLElement);
    expect(chart("reward/mean").series.slice(1).map((s) => s.alpha)).toEqual([1, 1, 1]);
  });

  it("groups runs by a config field into a mean line and a band, with the statistics panel", async () => {
    compareApi();
    renderCompare("?runs=1,2,3&keys=reward/mean&by=optim.lr");
    await waitFor(() => expect(steps(chart("reward/mean"))).toHaveLength(3));
    expect(chart("reward/mean").data).toHaveLength(7);
    const labels = screen.getAllByTestId("legend-label").map((l) => l.textContent);
    expect(labels).toEqual(["lr=1e-6 (2 runs)", "lr=3e-6 (1 run)"]);
    const data = chart("reward/mean").data;
    // Group 1: runs 1 and 2 end at 0.6 and 0.7: mean 0.65, band 0.6–0.7.
    expect((data[1] as number[])[2]).toBeCloseTo(0.65);
    expect((data[2] as number[])[2]).toBeCloseTo(0.6);
    expect((data[3] as number[])[2]).toBeCloseTo(0.7);
    expect((data[4] as number[])[2]).toBeCloseTo(0.8);
    expect(screen.getByTestId("stats-panel")).toBeTruthy();
    expect((screen.getByTestId("group-by") as HTMLSelectElement).value).toBe("optim.lr");

    // Standard error instead of min–max: runs 1 and 2 differ by 0.1, so ± 0.05.
    fireEvent.change(screen.getByTestId("band-mode"), { target: { value: "stderr" } });
    // One run in the second group: no band (its min–max band was 0.8–0.8). Charts get new data
    // at the next frame.
    await waitFor(() => expect((chart("reward/mean").data[5] as unknown[])[2]).toBeUndefined());
    expect((chart("reward/mean").data[2] as number[])[2]).toBeCloseTo(0.6);
    expect((chart("reward/mean").data[3] as number[])[2]).toBeCloseTo(0.7);

    // The final values of a group: mean ± sd, against the first group.
    const row = within(screen.getByTestId("final-table"))
      .getAllByRole("row")
      .find((r) => r.textContent?.startsWith("lr=3e-6")) as HTMLElement;
    expect(row.textContent).toContain("0.8");
    expect(within(row).getByTestId("final-diff").textContent).toBe("+0.15 (+23.1 %)");
  });

  it("offers the runs' tag prefixes and MLflow params to group by, and groups by them", async () => {
    const tagged: Record<number, Partial<RunDetail>> = {
      1: { tags: ["algo:ppo", "team:rl"], params: { "trainer/lr": "1e-06" } },
      2: { tags: ["algo:grpo", "team:rl"], params: { "trainer/lr": "1e-05" } },
      3: { tags: ["algo=ppo", "team:rl"], params: {} },
    };
    compareApi(
      Object.fromEntries([1, 2, 3].map((id) => [`GET /api/v1/runs/${id}`, () => ({ ...RUNS[id], ...tagged[id] })])),
    );
    renderCompare("?runs=1,2,3&keys=reward/mean");
    await waitFor(() => expect(steps(chart("reward/mean"))).toHaveLength(3));
    const picker = screen.getByTestId("group-by") as HTMLSelectElement;
    const offered = [...picker.querySelectorAll("optgroup")].map((g) => [
      g.getAttribute("label"),
      [...g.querySelectorAll("option")].map((o) => o.value),
    ]);
    // team:rl is on every run: no split to offer.
    expect(offered).toEqual([
      ["config fields that differ", ["optim.lr", "seed"]],
      ["tags (prefix:value)", ["tag:algo"]],
      ["MLflow params", ["param:trainer/lr"]],
    ]);

    fireEvent.change(picker, { target: { value: "tag:algo" } });
    await waitFor(() =>
      expect(screen.getAllByTestId("legend-label").map((l) => l.textContent)).toEqual([
        "algo=grpo (1 run)",
        "algo=ppo (2 runs)",
      ]),
    );
    expect(picker.value).toBe("tag:algo");
    expect(screen.getByTestId("stats-panel")).toBeTruthy();

    fireEvent.change(picker, { target: { value: "param:trainer/lr" } });
    await waitFor(() =>
      expect(screen.getAllByTestId("legend-label").map((l) => l.textContent)).toEqual([
        "trainer/lr=1e-06 (1 run)",
        "trainer/lr=1e-05 (1 run)",
        "(none) (1 run)",
      ]),
    );
  });

  it("says which run has two tags of the prefix grouped by, and draws each run alone", async () => {
    compareApi({ "GET /api/v1/runs/2": () => ({ ...RUNS[2], tags: ["seed:1", "seed:2"] }) });
    renderCompare("?runs=1,2&keys=reward/mean&by=tag:seed");
    const error = await screen.findByTestId("grouping-error");
    expect(error.textContent).toContain("Run #2 (pace lr small seed 1) has 2 tags with prefix seed: seed:1 and seed:2");
    expect(screen.getAllByTestId("legend-entry")).toHaveLength(2);
    expect(screen.queryByTestId("stats-panel")).toBeNull();
  });

  it("zooms every chart to a dragged range and asks for that range at finer detail", async () => {
    compareApi();
    renderCompare("?runs=1,2");
    await waitFor(() => expect(steps(chart("eval/acc"))).toHaveLength(3));
    const made = plots.made.length;
    const plot = chart("reward/mean");
    plot.options.cursor.bind.mousedown(plot, null, () => null)(new MouseEvent("mousedown"));
    plot.select = { left: 1, top: 0, width: 20, height: 100 };
    plot.options.hooks.setSelect.forEach((hook) => hook(plot));
    await waitFor(() => expect(queryBodies()).toHaveLength(2));
    expect(queryBodies()[1]).toMatchObject({ runs: [1, 2], start: 1, end: 21 });
    expect(chart("eval/acc").scales.x).toEqual({ min: 1, max: 21 });
    expect(screen.getByTestId("zoom-state").textContent).toContain("1–21");
    // Zooming feeds the charts; it does not rebuild them.
    expect(plots.made.length).toBe(made);

    plot.options.cursor.bind.dblclick(plot, null, () => null)(new MouseEvent("dblclick"));
    await waitFor(() => expect(screen.queryByTestId("zoom-state")).toBeNull());
  });

  it("patches the charts of running runs from their websocket, without new charts", async () => {
    const running = { ...RUNS, 1: runDetail({ ...RUNS[1], status: "RUNNING" }) };
    compareApi({ "GET /api/v1/runs/1": () => running[1] });
    renderCompare("?runs=1,2&keys=reward/mean");
    await waitFor(() => expect(steps(chart("reward/mean"))).toHaveLength(3));
    const made = plots.made.length;
    // Only the running run is followed, on one socket for every running run.
    expect(FakeWebSocket.opened.map((s) => s.url)).toEqual([`ws://${window.location.host}/ws/runs/?ids=1`]);
    expect(screen.getByTestId("live-state").textContent).toBe("connecting the live feed of 1 run…");
    const socket = FakeWebSocket.latest();
    socket.accept();
    socket.send({ type: "run.snapshot", run: runSummary({ id: 1, status: "RUNNING" }), seq: 1, epoch: "e" });
    expect(screen.getByTestId("live-state").textContent).toBe("live: 1 running run");
    socket.send({
      type: "metrics.points",
      run_id: 1,
      series: [{ key: "reward/mean", steps: [3], values: [0.9] }],
      seq: 2,
      epoch: "e",
    });
    await waitFor(() => expect(steps(chart("reward/mean"))).toEqual([0, 1, 2, 3]));
    expect(chart("reward/mean").data[1]).toEqual([0.1, 0.3, 0.6, 0.9]);
    expect(chart("reward/mean").data[2]).toEqual([0.1, 0.3, 0.7, undefined]);
    expect(plots.made.length).toBe(made);
  });

  it("redraws only the chart of a key that got live points", async () => {
    const running = { ...RUNS, 1: runDetail({ ...RUNS[1], status: "RUNNING" }) };
    compareApi({ "GET /api/v1/runs/1": () => running[1] });
    renderCompare("?runs=1,2&keys=reward/mean,eval/acc");
    await waitFor(() => expect(steps(chart("eval/acc"))).toHaveLength(3));
    const socket = FakeWebSocket.latest();
    socket.accept();
    socket.send({ type: "run.snapshot", run: runSummary({ id: 1, name: RUNS[1]?.name, status: "RUNNING" }), seq: 1, epoch: "e" });
    await waitFor(() => expect(screen.getByTestId("live-state").textContent).toBe("live: 1 running run"));
    const evalDraws = chart("eval/acc").draws;
    socket.send({ type: "metrics.points", run_id: 1, series: [{ key: "reward/mean", steps: [3], values: [0.9] }], seq: 2, epoch: "e" });
    await waitFor(() => expect(steps(chart("reward/mean"))).toEqual([0, 1, 2, 3]));
    // The run's key list changed too (its latest value): no other chart is redrawn for it.
    expect(chart("eval/acc").draws).toBe(evalDraws);
  });

  it("asks for the metrics of the keys in the URL beside the runs' details, not after them", async () => {
    let answerRuns: () => void = () => {};
    const runsHeld = new Promise<void>((resolve) => (answerRuns = resolve));
    compareApi({
      "POST /api/v1/compare/runs": async () => {
        await runsHeld;
        return { runs: [1, 2].map((id) => ({ run: RUNS[id], keys: keysOf(id).keys })) };
      },
    });
    renderCompare("?runs=1,2&keys=reward/mean");
    await waitFor(() => expect(queryBodies()).toHaveLength(1));
    expect(queryBodies()[0]).toEqual({ runs: [1, 2], keys: ["reward/mean"], max_points: 1000 });
    answerRuns();
    await waitFor(() => expect(steps(chart("reward/mean"))).toHaveLength(3));
    expect(queryBodies()).toHaveLength(1);
  });

  it("asks again for nothing when each followed run sends its snapshot", async () => {
    const running = { 1: runDetail({ ...RUNS[1], status: "RUNNING" }), 2: runDetail({ ...RUNS[2], status: "RUNNING" }) };
    const api = compareApi({ "GET /api/v1/runs/1": () => running[1], "GET /api/v1/runs/2": () => running[2] });
    renderCompare("?runs=1,2&keys=reward/mean");
    await waitFor(() => expect(steps(chart("reward/mean"))).toHaveLength(3));
    const socket = FakeWebSocket.latest();
    socket.accept();
    for (const id of [1, 2]) socket.send({ type: "run.snapshot", run: runSummary({ id, status: "RUNNING" }), seq: 1, epoch: "e" });
    socket.send({ type: "metrics.points", run_id: 2, series: [{ key: "reward/mean", steps: [3], values: [0.8] }], seq: 2, epoch: "e" });
    await waitFor(() => expect(steps(chart("reward/mean"))).toEqual([0, 1, 2, 3]));
    expect(queryBodies()).toHaveLength(1);
    expect(api.callsTo("/api/v1/compare/runs")).toBe(1);
    expect(api.callsTo("/api/v1/runs/1") + api.callsTo("/api/v1/runs/2/metrics/keys")).toBe(0);
  });

  it("shows the config paths two runs differ at", async () => {
    compareApi();
    renderCompare("?runs=1,2,3&keys=reward/mean");
    const diff = await screen.findByTestId("config-diff");
    const rows = () => within(diff).getAllByRole("row").slice(1).map((r) => r.textContent);
    expect(rows()).toEqual(["seed01"]);
    fireEvent.change(within(diff).getByTestId("diff-right"), { target: { value: "3" } });
    expect(rows()).toEqual(["optim.lr1e-63e-6"]);
    fireEvent.click(within(diff).getByRole("button", { name: "Swap the two runs" }));
    expect(rows()).toEqual(["optim.lr3e-61e-6"]);
  });

  it("compares a group's runs, offering its grid fields first", async () => {
    compareApi({
      "GET /api/v1/groups/7": () => ({
        id: 7,
        name: "pace",
        kind: "sweep",
        project: runSummary().project,
        recipe: "grpo",
        config: {},
        grid: { "optim.lr": [1e-6, 3e-6] },
        seeds: [0, 1],
        created_by: "demo",
        created_at: "2026-12-01T10:00:00Z",
        run_count: 3,
        runs: [1, 2, 3].map((id) => runSummary({ id, name: RUNS[id]?.name, status: "SUCCEEDED" })),
      }),
    });
    renderCompare("?group=7");
    expect(await screen.findByRole("heading", { name: "Compare pace" })).toBeTruthy();
    await screen.findByTestId("compare-chart-reward/mean");
    expect(screen.getAllByTestId("legend-entry")).toHaveLength(3);
    const grid = screen.getByTestId("group-by").querySelectorAll("option[data-grid]");
    expect([...grid].map((o) => o.getAttribute("value"))).toEqual(["optim.lr"]);
  });
});
