import { cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Route, Routes } from "react-router";

import { errorResponse, stubApi } from "../../test/api";
import { renderPage } from "../../test/render";
import type { AdmittedRun, Queue, QueuedRun, TeamQueue } from "./api";
import { QueuePage } from "./QueuePage";

const soon = (seconds: number) => new Date(Date.now() + seconds * 1000).toISOString();

function team(overrides: Partial<TeamQueue> = {}): TeamQueue {
  return {
    team: 1,
    slug: "lab",
    cpu: 1,
    gpu: null,
    weight: 1,
    borrow: false,
    preemption: "never",
    holding: { CPU: 1 },
    share: 0.0625,
    usage: 0.1,
    usage_at: null,
    queued: 2,
    admitted: 1,
    ...overrides,
  };
}

function queued(overrides: Partial<QueuedRun> = {}): QueuedRun {
  return {
    run: 8,
    name: "second",
    team: 1,
    project: "default",
    owner: "alice",
    recipe: "smoke",
    priority: 0,
    attempt: 1,
    queued_at: soon(-60),
    demand: { CPU: 1 },
    position: 1,
    reason: "lab's quota: 1 of 1 CPU in use, this run needs 1",
    ahead: [],
    ahead_count: 0,
    eta: { start: soon(245), low: soon(185), high: soon(365), estimated_at: soon(-5) },
    waiting_for: "queued: lab's quota: 1 of 1 CPU in use, this run needs 1 (1st in lab's queue)",
    ...overrides,
  };
}

function admitted(overrides: Partial<AdmittedRun> = {}): AdmittedRun {
  return {
    run: 7,
    name: "first",
    team: 1,
    project: "default",
    owner: "alice",
    recipe: "smoke",
    priority: 0,
    attempt: 1,
    status: "RUNNING",
    demand: { CPU: 1 },
    borrowed: false,
    admitted_at: soon(-120),
    started_at: soon(-110),
    step: 50,
    steps: 200,
    ...overrides,
  };
}

function queue(overrides: Partial<Queue> = {}): Queue {
  return {
    capacity: { CPU: 16, GPU: 0 },
    held: { CPU: 1 },
    free: { CPU: 15 },
    teams: [team()],
    queued: [
      queued(),
      queued({ run: 9, name: "third", position: 2, ahead: [8], ahead_count: 1, eta: { unknown: "no finished run of smoke" } }),
      queued({ run: 10, name: "fourth", position: null, reason: "waiting for the next scheduling pass", eta: null }),
    ],
    admitted: [admitted(), admitted({ run: 6, name: "borrower", borrowed: true, steps: null, step: null })],
    ...overrides,
  };
}

const TEAMS = {
  count: 1,
  next: null,
  previous: null,
  results: [{ id: 1, slug: "lab", name: "Lab", role: "member", viewers_may_vote: false, created_at: "2026-11-01T00:00:00Z" }],
};

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("the queue page", () => {
  it("shows the cluster, the team's quota, the waiting runs with reason and estimate, and the admitted runs", async () => {
    stubApi({ "GET /api/v1/teams": () => TEAMS, "GET /api/v1/queue": () => queue() });
    renderPage(<QueuePage />, { path: "/queue", route: "/queue" });

    const rows = await screen.findAllByTestId("queued-run");
    expect(screen.getByTestId("capacity").textContent).toBe("16 CPU");
    expect(screen.getByTestId("held").textContent).toBe("1 CPU");
    expect(screen.getByTestId("free").textContent).toBe("15 CPU");

    const lab = screen.getByTestId("queue-team");
    expect([...lab.querySelectorAll("td")].map((td) => td.textContent)).toEqual([
      "lab",
      "1",
      "no limit",
      "1 CPU",
      "6%",
      "1",
      "no",
      "never",
      "2",
      "1",
    ]);

    expect(rows.map((r) => r.getAttribute("data-run"))).toEqual(["8", "9", "10"]);
    const [first, second, third] = rows as [HTMLElement, HTMLElement, HTMLElement];
    expect(within(first).getByRole("link", { name: "#8 second" }).getAttribute("href")).toBe("/runs/8");
    expect(within(first).getByTestId("reason").textContent).toMatch(/^lab's quota: 1 of 1 CPU in use, this run needs 1 · queued 1 min ago$/);
    const eta = within(first).getByTestId("eta");
    expect(eta.textContent).toBe("in ~4 min (3–6 min)");
    expect(eta.getAttribute("title")).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d \(between \d\d:\d\d and \d\d:\d\d\); estimated at \d\d:\d\d$/);
    expect(within(second).getByTestId("eta").textContent).toBe("no estimate: no finished run of smoke");
    expect(within(third).getByTestId("eta").textContent).toBe("estimating…");
    expect(third.querySelector("td")?.textContent).toBe("–");

    const [running, borrower] = screen.getAllByTestId("admitted-run") as [HTMLElement, HTMLElement];
    expect(within(running).getByText("RUNNING")).toBeTruthy();
    expect(within(running).getByText("50/200")).toBeTruthy();
    expect(within(running).queryByText("borrowed")).toBeNull();
    expect(within(borrower).getByText("borrowed")).toBeTruthy();
    // One team: no team column.
    expect(screen.getByTestId("queue-queued").querySelectorAll("th")).toHaveLength(7);
  });

  it("asks for one team's queue at /teams/:id/queue, and the picker goes back to all", async () => {
    const api = stubApi({ "GET /api/v1/teams": () => TEAMS, "GET /api/v1/queue": () => queue() });
    renderPage(
      <Routes>
        <Route path="/teams/:id/queue" element={<QueuePage />} />
        <Route path="/queue" element={<p>all teams</p>} />
      </Routes>,
      { path: "/teams/1/queue", route: "*" },
    );
    expect(await screen.findByRole("heading", { name: "Queue of lab" })).toBeTruthy();
    expect(api.calls).toContain("GET /api/v1/queue?team=1");
    fireEvent.change(screen.getByTestId("team-picker"), { target: { value: "" } });
    expect(await screen.findByText("all teams")).toBeTruthy();
  });

  it("adds the team's audit to a team's queue, not to every team's", async () => {
    const empty = { count: 0, next: null, previous: null, results: [] };
    const api = stubApi({
      "GET /api/v1/teams": () => TEAMS,
      "GET /api/v1/queue": () => queue(),
      "GET /api/v1/teams/1/admissions": () => empty,
      "GET /api/v1/teams/1/preemptions": () => empty,
    });
    renderPage(<QueuePage />, { path: "/teams/1/queue", route: "/teams/:id/queue" });
    expect(await screen.findByRole("heading", { name: "Audit" })).toBeTruthy();
    expect(await screen.findByText("The scheduler has admitted none of this team's runs yet.")).toBeTruthy();
    expect(api.calls).toContain("GET /api/v1/teams/1/preemptions?limit=20&offset=0");
    cleanup();

    renderPage(<QueuePage />, { path: "/queue", route: "/queue" });
    await screen.findAllByTestId("queued-run");
    expect(screen.queryByTestId("queue-audit")).toBeNull();
  });

  it("adds a team column when several teams show, and says when nothing waits or Ray cannot be asked", async () => {
    const other = team({ team: 2, slug: "other", cpu: null, queued: 0, admitted: 1 });
    stubApi({
      "GET /api/v1/teams": () => TEAMS,
      "GET /api/v1/queue": () =>
        queue({ capacity: null, free: null, teams: [team(), other], queued: [], admitted: [admitted({ team: 2 })] }),
    });
    renderPage(<QueuePage />, { path: "/queue", route: "/queue" });
    expect(await screen.findByText("No run waits: every submitted run was admitted.")).toBeTruthy();
    expect(screen.getByTestId("capacity").textContent).toBe("unknown");
    expect(screen.getByText(/only quotas are checked/)).toBeTruthy();
    const [row] = screen.getAllByTestId("admitted-run") as [HTMLElement];
    expect(within(row).getByText("other")).toBeTruthy();
    const options = [...(screen.getByTestId("team-picker") as HTMLSelectElement).options].map((o) => o.textContent);
    expect(options).toEqual(["all", "lab", "other"]);
  });

  it("shows the API's error", async () => {
    stubApi({
      "GET /api/v1/teams": () => TEAMS,
      "GET /api/v1/queue": () => errorResponse(404, "not_found", "Team 3 not found."),
    });
    renderPage(<QueuePage />, { path: "/teams/3/queue", route: "/teams/:id/queue" });
    await waitFor(() => expect(screen.getByRole("alert").textContent).toContain("Team 3 not found."));
  });
});
