import { cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { CompareStats, RunGroupDetail } from "../../api/types";
import { jsonResponse, runSummary, stubApi } from "../../test/api";
import { renderPage } from "../../test/render";
import { page, sentBodies } from "../evals/testing";
import { describeSweep, formatInterval } from "./format";
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

  it("says so when the group cannot be loaded", async () => {
    stubApi({});
    renderPage(<GroupPage />, { path: "/groups/9", route: "/groups/:id" });
    expect((await screen.findByRole("alert")).textContent).toContain("Cannot load group 9");
  });
});
