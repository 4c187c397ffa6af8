import { act, cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

import { RUNS_REFETCH_MS } from "../../api/hooks";
import { errorResponse, never, runSummary, stubApi } from "../../test/api";
import { renderPage } from "../../test/render";
import type { RunTablePage, RunTableRow } from "./api";
import { RunsPage } from "./RunsPage";

afterEach(() => {
  cleanup();
  vi.useRealTimers();
  vi.unstubAllGlobals();
  localStorage.clear();
});

function row(overrides: Partial<RunTableRow> = {}): RunTableRow {
  return { ...runSummary(), metrics: {}, ...overrides };
}

function page(results: RunTableRow[]): RunTablePage {
  return { count: results.length, next: null, previous: null, results };
}

const KEYS = { keys: [{ key: "reward/mean", runs: 2 }, { key: "loss", runs: 1 }] };

describe("the runs page", () => {
  it("says it is loading until the first page arrives", () => {
    stubApi({ "GET /api/v1/runs/table": never, "GET /api/v1/runs/table/keys": never });
    renderPage(<RunsPage />);
    expect(within(screen.getByTestId("runs-table")).getByText("Loading…")).toBeTruthy();
  });

  it("lists the runs with reward/mean as a column when the runs report it", async () => {
    const api = stubApi({
      "GET /api/v1/runs/table/keys": () => KEYS,
      "GET /api/v1/runs/table": (url) =>
        page([
          row({ id: 7, name: "second", status: "QUEUED", waiting_for: "waiting for cluster resources: 1 task" }),
          row({
            id: 5,
            name: "first",
            status: "SUCCEEDED",
            finished_at: "2026-11-30T10:01:00Z",
            groups: [{ id: 3, name: "lr-sweep", kind: "sweep" }],
            metrics: url.searchParams.get("metrics")
              ? { "reward/mean": { value: 0.61234567, step: 99, count: 100, spark: [0.1, 0.3, "NaN", 0.6] } }
              : {},
          }),
        ]),
    });
    renderPage(<RunsPage />);
    expect((await screen.findByTestId("metric-5-reward/mean")).textContent).toBe("0.61235");
    expect(screen.getByTestId("status-7").textContent).toBe("QUEUED");
    expect(within(screen.getByTestId("run-row-5")).getByRole("link", { name: "first" })).toBeTruthy();
    expect(within(screen.getByTestId("run-row-5")).getByRole("link", { name: "lr-sweep" }).getAttribute("href")).toBe(
      "/groups/3",
    );
    expect(screen.getByTestId("run-row-5").querySelector("svg.spark polyline")).toBeTruthy();
    // A run without the metric says so rather than showing a number.
    expect(within(screen.getByTestId("run-row-7")).getByTitle("run 7 has not logged reward/mean").textContent).toBe("–");
    expect(screen.getByTestId("waiting-7")).toBeTruthy();
    expect(screen.queryByTestId("waiting-5")).toBeNull();
    expect(screen.getByText(/1–2 of 2/)).toBeTruthy();
    expect(api.calls).toContain("GET /api/v1/runs/table?limit=50&offset=0&metrics=reward%2Fmean&spark=30");
  });

  it("sorts by a metric column from its header, largest first", async () => {
    const api = stubApi({
      "GET /api/v1/runs/table/keys": () => KEYS,
      "GET /api/v1/runs/table": () => page([row({ id: 5 })]),
    });
    renderPage(<RunsPage />, { path: "/?metrics=loss" });
    fireEvent.click(await screen.findByRole("button", { name: /^loss/ }));
    await waitFor(() =>
      expect(api.calls).toContain("GET /api/v1/runs/table?limit=50&offset=0&sort=-metric%3Aloss&metrics=loss&spark=30"),
    );
    expect(screen.getByRole("columnheader", { name: /loss/ }).getAttribute("aria-sort")).toBe("descending");
  });

  it("adds a column from the picker and remembers it", async () => {
    const api = stubApi({
      "GET /api/v1/runs/table/keys": () => KEYS,
      "GET /api/v1/runs/table": () => page([row({ id: 5 })]),
    });
    renderPage(<RunsPage />);
    fireEvent.click(await screen.findByTestId("columns-button"));
    const panel = screen.getByRole("dialog", { name: "metric columns" });
    fireEvent.click(await within(panel).findByRole("checkbox", { name: /loss/ }));
    await waitFor(() => expect(api.calls.some((c) => c.includes("metrics=reward%2Fmean%2Closs"))).toBe(true));
    expect(JSON.parse(localStorage.getItem("barrel.runColumns") ?? "null")).toEqual(["reward/mean", "loss"]);
  });

  it("makes a group of the selected runs of one project, and refuses runs of two", async () => {
    stubApi({
      "GET /api/v1/runs/table/keys": () => KEYS,
      "GET /api/v1/runs/table": () =>
        page([
          row({ id: 5 }),
          row({ id: 6 }),
          row({ id: 8, project: { ...runSummary().project, id: 2, name: "other" } }),
        ]),
      "POST /api/v1/groups": async () => {
        return { id: 12, name: "pair", runs: [] };
      },
    });
    renderPage(<RunsPage />);
    fireEvent.click(await screen.findByRole("checkbox", { name: "select run 5" }));
    fireEvent.click(screen.getByRole("checkbox", { name: "select run 8" }));
    const bar = screen.getByRole("region", { name: "selected runs" });
    fireEvent.change(within(bar).getByRole("textbox", { name: "group name" }), { target: { value: "pair" } });
    expect((within(bar).getByRole("button", { name: "Make group" }) as HTMLButtonElement).disabled).toBe(true);
    expect(within(bar).getByText(/runs of 2 projects/)).toBeTruthy();

    fireEvent.click(screen.getByRole("checkbox", { name: "select run 8" }));
    fireEvent.click(screen.getByRole("checkbox", { name: "select run 6" }));
    expect(within(bar).getByText("2 selected")).toBeTruthy();
    fireEvent.click(within(bar).getByRole("button", { name: "Make group" }));
    await waitFor(() => {
      const posts = vi.mocked(fetch).mock.calls.filter(([, init]) => init?.method === "POST");
      expect(posts.map(([, init]) => JSON.parse(String(init?.body)))).toContainEqual({
        project: 1,
        name: "pair",
        runs: [5, 6],
      });
    });
  });

  it("says so when no run matches", async () => {
    stubApi({ "GET /api/v1/runs/table/keys": () => ({ keys: [] }), "GET /api/v1/runs/table": () => page([]) });
    renderPage(<RunsPage />, { path: "/?status=FAILED" });
    expect(await screen.findByText("No runs match these filters.")).toBeTruthy();
    expect(screen.getByText(/0 runs/)).toBeTruthy();
    expect((screen.getByTestId("filter-status") as HTMLSelectElement).value).toBe("FAILED");
  });

  it("shows the API's error message when the list cannot be loaded", async () => {
    stubApi({
      "GET /api/v1/runs/table/keys": () => KEYS,
      "GET /api/v1/runs/table": () => errorResponse(400, "validation_error", "status: unknown status 'LOST'."),
    });
    renderPage(<RunsPage />);
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toBe("Cannot load runs: status: unknown status 'LOST'.");
    expect(screen.queryByText("Loading…")).toBeNull();
  });

  it("follows a run's status on the next poll", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    let status: "RUNNING" | "FAILED" = "RUNNING";
    const api = stubApi({
      "GET /api/v1/runs/table/keys": () => KEYS,
      "GET /api/v1/runs/table": () => page([row({ id: 5, status })]),
    });
    renderPage(<RunsPage />);
    expect((await screen.findByTestId("status-5")).textContent).toBe("RUNNING");

    status = "FAILED";
    await act(() => vi.advanceTimersByTimeAsync(RUNS_REFETCH_MS));
    expect((await screen.findByTestId("status-5")).textContent).toBe("FAILED");
    expect(api.callsTo("/api/v1/runs/table")).toBeGreaterThanOrEqual(2);
  });
});
