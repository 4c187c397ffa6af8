import { cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Route, Routes } from "react-router";

import { errorResponse, never, stubApi } from "../../test/api";
import { renderPage } from "../../test/render";
import type { Alert } from "../run/AlertsPanel";
import { AlertsIndexPage, TeamAlertsPage } from "./AlertsPage";

function alert(overrides: Partial<Alert> = {}): Alert {
  return {
    id: 3,
    run: 12,
    run_name: "grpo-big",
    kind: "nan_inf",
    severity: "critical",
    message: "loss is NaN at step 40",
    first_step: 40,
    last_step: 40,
    details: {},
    created_at: "2026-12-02T10:00:00Z",
    acknowledged_at: null,
    acknowledged_by: null,
    delivered_at: null,
    delivery_attempts: 0,
    delivery_error: "",
    ...overrides,
  };
}

const ACKED = alert({
  id: 2,
  run: 9,
  run_name: "ppo-small",
  kind: "kl_spike",
  severity: "warning",
  message: "policy/kl_ref jumped 9× its baseline",
  first_step: 100,
  last_step: 160,
  acknowledged_at: "2026-12-02T11:00:00Z",
  acknowledged_by: "bob",
});

function teams(role = "member") {
  return {
    count: 1,
    next: null,
    previous: null,
    results: [{ id: 1, slug: "lab", name: "Lab", role, viewers_may_vote: false, created_at: "2026-11-01T00:00:00Z" }],
  };
}

function page(results: Alert[], count = results.length) {
  return { count, next: null, previous: null, results };
}

const FEED = "GET /api/v1/teams/1/alerts";
const AT = { path: "/teams/1/alerts", route: "/teams/:id/alerts" };

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("the team alert feed", () => {
  it("lists the team's alerts with their kind in words, run link to the step, and who acknowledged", async () => {
    stubApi({ "GET /api/v1/teams": () => teams(), [FEED]: () => page([alert(), ACKED]) });
    renderPage(<TeamAlertsPage />, AT);
    const rows = await screen.findAllByTestId("alert-row");
    expect(rows).toHaveLength(2);
    const [open, acked] = rows as [HTMLElement, HTMLElement];
    expect(within(open).getByText("NaN/Inf in loss or gradients")).toBeTruthy();
    expect(within(open).getByText("critical")).toBeTruthy();
    expect(within(open).getByRole("link", { name: "#12 grpo-big" }).getAttribute("href")).toBe("/runs/12?step=40");
    expect(within(open).getByText("step 40")).toBeTruthy();
    expect(within(open).getByRole("button", { name: "Acknowledge NaN/Inf in loss or gradients on run 12" })).toBeTruthy();
    expect(within(acked).getByText("KL spike")).toBeTruthy();
    expect(within(acked).getByText("steps 100–160")).toBeTruthy();
    expect(within(acked).getByTestId("acknowledged").textContent).toMatch(/^by bob · 2026-12-0\d \d\d:\d\d$/);
    expect(within(acked).queryByRole("button")).toBeNull();
    expect(screen.getByRole("heading").textContent).toBe("Alerts of Lab");
  });

  it("acknowledges an alert and asks for the feed again", async () => {
    let acknowledged = false;
    const api = stubApi({
      "GET /api/v1/teams": () => teams(),
      [FEED]: () => page([acknowledged ? alert({ acknowledged_at: "2026-12-03T09:00:00Z", acknowledged_by: "ann" }) : alert()]),
      "POST /api/v1/alerts/3/acknowledge": () => {
        acknowledged = true;
        return alert({ acknowledged_at: "2026-12-03T09:00:00Z", acknowledged_by: "ann" });
      },
    });
    document.cookie = "csrftoken=t";
    renderPage(<TeamAlertsPage />, AT);
    fireEvent.click(await screen.findByRole("button", { name: /^Acknowledge/ }));
    await waitFor(() => expect(screen.getByTestId("acknowledged").textContent).toContain("by ann"));
    expect(api.callsTo("/api/v1/alerts/3/acknowledge")).toBe(1);
    expect(api.callsTo("/api/v1/teams/1/alerts")).toBe(2);
  });

  it("offers a viewer no Acknowledge button", async () => {
    stubApi({ "GET /api/v1/teams": () => teams("viewer"), [FEED]: () => page([alert()]) });
    renderPage(<TeamAlertsPage />, AT);
    const row = await screen.findByTestId("alert-row");
    await waitFor(() => expect(screen.getByRole("heading").textContent).toBe("Alerts of Lab"));
    expect(within(row).queryByRole("button")).toBeNull();
    expect(within(row).getByTestId("acknowledged").textContent).toBe("open");
  });

  it("asks the server for open or acknowledged alerts and for a kind, and keeps both in the URL", async () => {
    const api = stubApi({
      "GET /api/v1/teams": () => teams(),
      [FEED]: (url) => {
        const acked = url.searchParams.get("acknowledged");
        const kind = url.searchParams.get("kind");
        const found = acked === "false" ? [alert()] : acked === "true" ? [ACKED] : [alert(), ACKED];
        return page(kind ? found.filter((a) => a.kind === kind) : found);
      },
    });
    renderPage(<TeamAlertsPage />, { ...AT, path: "/teams/1/alerts?state=open" });
    expect((await screen.findAllByTestId("alert-row")).map((r) => r.dataset.kind)).toEqual(["nan_inf"]);
    expect((screen.getByTestId("state-filter") as HTMLSelectElement).value).toBe("open");
    expect(api.calls.some((c) => c.startsWith("GET /api/v1/teams/1/alerts?acknowledged=false&limit=50&offset=0"))).toBe(true);

    fireEvent.change(screen.getByTestId("state-filter"), { target: { value: "" } });
    await waitFor(() => expect(screen.getAllByTestId("alert-row")).toHaveLength(2));
    fireEvent.change(screen.getByTestId("kind-filter"), { target: { value: "kl_spike" } });
    await waitFor(() => expect(screen.getAllByTestId("alert-row").map((r) => r.dataset.kind)).toEqual(["kl_spike"]));
    expect(api.calls.some((c) => c === "GET /api/v1/teams/1/alerts?kind=kl_spike&limit=50&offset=0")).toBe(true);

    fireEvent.change(screen.getByTestId("kind-filter"), { target: { value: "stalled" } });
    expect(await screen.findByText("No alerts match these filters.")).toBeTruthy();
  });

  it("pages through the server's pages, and back to the first on a new filter", async () => {
    const api = stubApi({
      "GET /api/v1/teams": () => teams(),
      [FEED]: (url) => page([alert({ id: Number(url.searchParams.get("offset")) + 100 })], 120),
    });
    renderPage(<TeamAlertsPage />, AT);
    await screen.findByTestId("alert-row");
    expect(screen.getByText("1–50 of 120")).toBeTruthy();
    fireEvent.click(screen.getByRole("button", { name: "Next" }));
    expect(await screen.findByText("51–100 of 120")).toBeTruthy();
    expect(api.calls.some((c) => c.endsWith("limit=50&offset=50"))).toBe(true);
    // A new filter starts again from the newest.
    fireEvent.change(screen.getByTestId("state-filter"), { target: { value: "open" } });
    await waitFor(() => expect(api.calls.at(-1)).toBe("GET /api/v1/teams/1/alerts?acknowledged=false&limit=50&offset=0"));
  });

  it("says so when the team has no alerts", async () => {
    stubApi({ "GET /api/v1/teams": () => teams(), [FEED]: () => page([]) });
    renderPage(<TeamAlertsPage />, AT);
    expect(await screen.findByText(/No alerts: nothing in this team's runs/)).toBeTruthy();
  });

  it("shows loading, then the error", async () => {
    stubApi({
      "GET /api/v1/teams": () => never(),
      [FEED]: () => errorResponse(404, "not_found", "Team 1 not found."),
    });
    renderPage(<TeamAlertsPage />, AT);
    expect(screen.getByText("Loading…")).toBeTruthy();
    expect((await screen.findByRole("alert")).textContent).toContain("Team 1 not found.");
  });
});

describe("/alerts", () => {
  it("opens the first team's feed, and the picker switches to another team's", async () => {
    const two = teams();
    two.results.push({ ...two.results[0]!, id: 2, slug: "ops", name: "Ops" });
    const api = stubApi({
      "GET /api/v1/teams": () => ({ ...two, count: 2 }),
      [FEED]: () => page([alert()]),
      "GET /api/v1/teams/2/alerts": () => page([ACKED]),
    });
    const app = (
      <Routes>
        <Route path="/alerts" element={<AlertsIndexPage />} />
        <Route path="/teams/:id/alerts" element={<TeamAlertsPage />} />
      </Routes>
    );
    renderPage(app, { path: "/alerts", route: "*" });
    expect((await screen.findByTestId("alert-row")).dataset.kind).toBe("nan_inf");
    fireEvent.change(screen.getByTestId("team-picker"), { target: { value: "2" } });
    await waitFor(() => expect(screen.getByRole("heading").textContent).toBe("Alerts of Ops"));
    expect((await screen.findByTestId("alert-row")).dataset.kind).toBe("kl_spike");
    expect(api.callsTo("/api/v1/teams/2/alerts")).toBeGreaterThan(0);
  });

  it("says so when the caller is in no team", async () => {
    stubApi({ "GET /api/v1/teams": () => ({ count: 0, next: null, previous: null, results: [] }) });
    renderPage(<AlertsIndexPage />, { path: "/alerts", route: "/alerts" });
    expect(await screen.findByText(/You are in no team yet/)).toBeTruthy();
  });
});
