import { cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { CompareStats, RunGroupDetail } from "../../api/types";
import { jsonResponse, runSummary, stubApi } from "../../test/api";
import { renderPage } from "../../test/render";
import { page, sentBodies } from "../evals/testing";
import { describeSweep, formatInterval } from "./format";
import { describeGroupBounding, type GroupScorecard } from "./GroupDiagnostics";
import { GroupPage } from "./GroupPage";
import { GroupsPage } from "./GroupsPage";

function sweep(overrides: Partial<RunGroupDetail> = {}): RunGroupDetail {
  return {
    id: 3,
    name: "pace",
    kind: "sweep",
    project: runSummary().project,
    recipe: "grpo",
    config: { steps: 100 },
    grid: { "optim.lr": [0.00001, 0.00003] },
    seeds: [0, 1, 2],
    created_by: "demo",
    created_at: "2026-12-01T10:00:00Z",
    run_count: 2,
    runs: [
      runSummary({ id: 11, name: "pace lr=1e-05 seed=0", status: "SUCCEEDED" }),
      runSummary({ id: 12, name: "pace lr=3e-05 seed=0", status: "SUCCEEDED" }),
    ],
    ...overrides,
  };
}

const STATS: CompareStats = {
  metric: "reward/mean",
  summary: "final",
  groups: [
    {
      name: "optim.lr=1e-05",
      runs: [{ id: 11, name: "a", value: 0.5 }],
      missing: [],
      summary: { n: 3, mean: 0.5, std: 0.02, iqm: 0.5, t_interval: [0.45, 0.55], bootstrap_mean: [0.48, 0.52], bootstrap_iqm: [0.48, 0.52] },
    },
    {
      name: "optim.lr=3e-05",
      runs: [{ id: 12, name: "b", value: 0.6 }],
      missing: [13],
      summary: { n: 3, mean: 0.6, std: 0.02, iqm: 0.6, t_interval: [0.55, 0.65], bootstrap_mean: [0.58, 0.62], bootstrap_iqm: [0.58, 0.62] },
    },
  ],
  comparisons: [
    {
      baseline: "optim.lr=1e-05",
      group: "optim.lr=3e-05",
      verdict: "optim.lr=3e-05 beats optim.lr=1e-05 on final reward/mean: +0.10 [0.05, 0.15], p = 0.002, 3 seeds each.",
      result: {
        difference: 0.1,
        welch_t: 6,
        welch_df: 4,
        p_value: 0.002,
        welch_interval: [0.05, 0.15],
        bootstrap_interval: [0.07, 0.13],
        probability_of_improvement: 1,
        effect_size: 5,
        significant: true,
        seeds_needed: 3,
        min_effect: 0.1,
        fragile: false,
        warnings: ["group a has 3 runs: fewer than 5, its spread is a guess"],
      },
    },
  ],
};

function figure(mean: number | null, min: number | null, max: number | null, runs: number) {
  return { mean, min, max, runs };
}

const NO_FIGURE = figure(null, null, null, 0);

/** Two train-bound runs and one reward-bound, and one that reported no step times. */
const SCORECARD: GroupScorecard = {
  group: 3,
  target_reward: 0.5,
  runs: [],
  summary: {
    tokens_per_s: figure(200, 100, 300, 3),
    samples_per_s: NO_FIGURE,
    goodput: figure(0.5, 0.25, 0.75, 3),
    reward_gained: NO_FIGURE,
    reward_per_cpu_hour: NO_FIGURE,
    reward_per_gpu_hour: NO_FIGURE,
    wall_s: figure(90, 60, 120, 3),
    time_to_target_s: figure(45, 45, 45, 1),
  },
  barrel: {
    runs: 3,
    runs_without_staves: 1,
    bounding: "train",
    bounded_runs: 2,
    staves: [
      { name: "reward", kind: "producer", runs: 3, mean_s: 4.6, mean_share: 0.25, min_share: 0.1, max_share: 0.63, mean_saved_if_2x_s: 2, bounds: 1 },
      { name: "train", kind: "trainer", runs: 3, mean_s: 6.6, mean_share: 0.57, min_share: 0.32, max_share: 0.73, mean_saved_if_2x_s: 2.5, bounds: 2 },
      { name: "trainer_wait", kind: "idle", runs: 3, mean_s: 5, mean_share: 0.3, min_share: 0.2, max_share: 0.64, mean_saved_if_2x_s: 0, bounds: 0 },
    ],
  },
};

beforeEach(() => {
  document.cookie = "csrftoken=test-token";
});

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("formatting", () => {
  it("says what a sweep varies and prints intervals", () => {
    expect(describeSweep(sweep())).toBe("optim.lr: 0.00001, 0.00003 × 3 seeds");
    expect(describeSweep(sweep({ kind: "manual" }))).toBe("runs grouped by hand");
    expect(formatInterval([0.45, 0.55])).toBe("[0.45, 0.55]");
    expect(formatInterval(null)).toBe("–");
  });
});

describe("the run groups page", () => {
  it("lists groups, each linking to its page, and says when there are none", async () => {
    stubApi({ "GET /api/v1/groups": () => page([sweep()]) });
    renderPage(<GroupsPage />, { path: "/groups", route: "/groups" });
    const row = await screen.findByTestId("group-row-3");
    expect(within(row).getByRole("link").getAttribute("href")).toBe("/groups/3");
    expect(row.textContent).toContain("optim.lr: 0.00001, 0.00003 × 3 seeds");
    cleanup();
    stubApi({ "GET /api/v1/groups": () => page([]) });
    renderPage(<GroupsPage />, { path: "/groups", route: "/groups" });
    expect(await screen.findByText("No run groups yet.")).toBeTruthy();
  });
});

describe("a group's page", () => {
  it("compares the sweep's configs on the metric asked and reads out the verdict", async () => {
    const fetchCalls = stubApi({
      "GET /api/v1/groups/3": () => sweep(),
      "GET /api/v1/groups/3/scorecard": () => SCORECARD,
      "GET /api/v1/runs/11/metrics/keys": () => ({
        keys: [
          { key: "loss", count: 10, first_step: 0, last_step: 9, last_value: 1 },
          { key: "reward/mean", count: 10, first_step: 0, last_step: 9, last_value: 0.5 },
        ],
      }),
      "POST /api/v1/compare/stats": () => STATS,
    });
    renderPage(<GroupPage />, { path: "/groups/3", route: "/groups/:id" });
    expect((await screen.findByTestId("group-varies")).textContent).toContain("optim.lr: 0.00001, 0.00003 × 3 seeds");
    expect(screen.getByTestId("group-export").getAttribute("href")).toBe("/api/v1/groups/3/export");
    await waitFor(() => expect((screen.getByTestId("stats-metric") as HTMLSelectElement).value).toBe("reward/mean"));
    fireEvent.click(screen.getByRole("button", { name: "Compare" }));
    const verdict = await screen.findByTestId("verdict-optim.lr=3e-05");
    expect(verdict.textContent).toContain("optim.lr=3e-05 beats optim.lr=1e-05 on final reward/mean: +0.10 [0.05, 0.15]");
    expect(verdict.textContent).toContain("fewer than 5");
    expect(verdict.textContent).toContain("3 seeds per group detect a difference of 0.1 with power 0.8");
    const row = screen.getByTestId("stats-group-optim.lr=3e-05");
    expect(row.textContent).toContain("[0.55, 0.65]");
    expect(row.textContent).toContain("(+1 without)");
    const [body] = sentBodies(vi.mocked(fetch).mock.calls, "POST", "/api/v1/compare/stats");
    expect(body).toMatchObject({ metric: "reward/mean", summary: "final", runs: [11, 12], group_by: "optim.lr" });
    expect(fetchCalls.callsTo("/api/v1/compare/stats")).toBe(1);

    // Another baseline: asked again with it.
    fireEvent.click(within(screen.getByTestId("stats-group-optim.lr=3e-05")).getByRole("button", { name: "make baseline" }));
    await waitFor(() => expect(fetchCalls.callsTo("/api/v1/compare/stats")).toBe(2));
    expect(sentBodies(vi.mocked(fetch).mock.calls, "POST", "/api/v1/compare/stats")[1]).toMatchObject({
      baseline: "optim.lr=3e-05",
    });
  });

  it("shows the server's refusal next to the form, naming the field", async () => {
    stubApi({
      "GET /api/v1/groups/3": () => sweep({ kind: "manual", grid: {} }),
      "GET /api/v1/groups/3/scorecard": () => SCORECARD,
      "GET /api/v1/runs/11/metrics/keys": () => ({ keys: [] }),
      "POST /api/v1/compare/stats": () =>
        jsonResponse({ error: "invalid", message: "group_by takes 60 values", fields: { group_by: ["more than 50 values"] } }, 400),
    });
    renderPage(<GroupPage />, { path: "/groups/3", route: "/groups/:id" });
    fireEvent.change(await screen.findByTestId("stats-metric"), { target: { value: "reward/mean" } });
    fireEvent.change(screen.getByTestId("stats-group-by"), { target: { value: "seed" } });
    fireEvent.click(screen.getByRole("button", { name: "Compare" }));
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toContain("group_by takes 60 values");
    expect(alert.textContent).toContain("more than 50 values");
  });

  it("names the stave bounding most runs, tabulates the staves and summarises the scorecards", async () => {
    const fetchCalls = stubApi({
      "GET /api/v1/groups/3": () => sweep(),
      "GET /api/v1/groups/3/scorecard": () => SCORECARD,
      "GET /api/v1/runs/11/metrics/keys": () => ({ keys: [] }),
    });
    renderPage(<GroupPage />, { path: "/groups/3", route: "/groups/:id" });
    expect((await screen.findByTestId("group-bounding")).textContent).toBe(
      "Bounded by train: it bounds 2 of the 3 runs (1 without step times left out).",
    );
    const cells = (testId: string) => [...screen.getByTestId(testId).children].map((cell) => cell.textContent);
    expect(screen.getByTestId("group-stave-train").className).toBe("bounding");
    expect(cells("group-stave-train")).toEqual([" train", "6.6 s", "57.0%", "32.0%–73.0%", "2", "3"]);
    expect(screen.getByTestId("group-stave-reward").className).toBe("");
    expect(screen.getByTestId("group-stave-trainer_wait").textContent).toContain("trainer_wait (idle)");
    expect(cells("group-score-tokens_per_s")).toEqual(["tokens/s", "200", "100", "300", "3"]);
    expect(cells("group-score-goodput")).toEqual(["goodput (tokens with a learning signal)", "50.0%", "25.0%", "75.0%", "3"]);
    expect(screen.getByTestId("group-score-time_to_target_s").textContent).toContain("time to reward 0.5");
    expect(screen.getByTestId("group-score-samples_per_s").textContent).toBe("samples/s–––0");
    expect(fetchCalls.callsTo("/api/v1/groups/3/scorecard")).toBe(1);
  });

  it("says why a group has no bounding stave, and when its scorecard cannot be loaded", async () => {
    const none = { runs: 0, runs_without_staves: 2, bounding: null, bounded_runs: 0, staves: [] };
    expect(describeGroupBounding(none)).toBe("No run has reported its step times yet.");
    expect(describeGroupBounding({ ...SCORECARD.barrel, bounding: null, bounded_runs: 0, runs_without_staves: 0 })).toBe(
      "No stave bounds any of the 3 runs.",
    );
    stubApi({
      "GET /api/v1/groups/3": () => sweep(),
      "GET /api/v1/runs/11/metrics/keys": () => ({ keys: [] }),
    });
    renderPage(<GroupPage />, { path: "/groups/3", route: "/groups/:id" });
    const diagnostics = await screen.findByTestId("group-diagnostics");
    await waitFor(() => expect(within(diagnostics).getByRole("alert").textContent).toContain("Cannot load the group's scorecard"));
  });

  it("says so when the group cannot be loaded", async () => {
    stubApi({});
    renderPage(<GroupPage />, { path: "/groups/9", route: "/groups/:id" });
    expect((await screen.findByRole("alert")).textContent).toContain("Cannot load group 9");
  });
});
