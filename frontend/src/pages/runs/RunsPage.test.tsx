import { act, cleanup, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

import { RUNS_REFETCH_MS } from "../../api/hooks";
import { errorResponse, never, runPage, runSummary, stubApi } from "../../test/api";
import { renderPage } from "../../test/render";
import { RunsPage } from "./RunsPage";

afterEach(() => {
  cleanup();
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

describe("the runs page", () => {
  it("says it is loading until the first page arrives", () => {
    stubApi({ "GET /api/v1/runs": never });
    renderPage(<RunsPage />);
    expect(within(screen.getByTestId("runs-table")).getByText("Loading…")).toBeTruthy();
  });

  it("lists the runs of the page it asked for", async () => {
    const api = stubApi({
      "GET /api/v1/runs": () =>
        runPage([
          runSummary({ id: 7, name: "second", status: "QUEUED", waiting_for: "waiting for cluster resources: 1 task" }),
          runSummary({ id: 5, name: "first", status: "SUCCEEDED", finished_at: "2026-11-30T10:01:00Z" }),
        ]),
    });
    renderPage(<RunsPage />);
    expect((await screen.findByTestId("status-7")).textContent).toBe("QUEUED");
    expect(screen.getByTestId("status-5").textContent).toBe("SUCCEEDED");
    expect(within(screen.getByTestId("run-row-5")).getByRole("link").textContent).toBe("first");
    expect(screen.getByTestId("run-row-5").textContent).toContain("lab/arith");
    // Only an unfinished run waits for resources.
    expect(screen.getByTestId("waiting-7")).toBeTruthy();
    expect(screen.queryByTestId("waiting-5")).toBeNull();
    expect(screen.getByText(/1–2 of 2/)).toBeTruthy();
    expect(api.calls[0]).toBe("GET /api/v1/runs?limit=50&offset=0");
  });

  it("says so when no run matches", async () => {
    stubApi({ "GET /api/v1/runs": () => runPage([]) });
    renderPage(<RunsPage />, { path: "/?status=FAILED" });
    expect(await screen.findByText("No runs match these filters.")).toBeTruthy();
    expect(screen.getByText(/0 runs/)).toBeTruthy();
    expect((screen.getByTestId("filter-status") as HTMLSelectElement).value).toBe("FAILED");
  });

  it("shows the API's error message when the list cannot be loaded", async () => {
    stubApi({
      "GET /api/v1/runs": () => errorResponse(400, "validation_error", "status: unknown status 'LOST'."),
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
      "GET /api/v1/runs": () => runPage([runSummary({ id: 5, status })]),
    });
    renderPage(<RunsPage />);
    expect((await screen.findByTestId("status-5")).textContent).toBe("RUNNING");

    status = "FAILED";
    await act(() => vi.advanceTimersByTimeAsync(RUNS_REFETCH_MS));
    expect((await screen.findByTestId("status-5")).textContent).toBe("FAILED");
    expect(api.callsTo("/api/v1/runs")).toBeGreaterThanOrEqual(2);
  });
});
