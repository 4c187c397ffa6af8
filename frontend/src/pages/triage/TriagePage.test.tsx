import { cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { Route, Routes } from "react-router";
import { afterEach, describe, expect, it, vi } from "vitest";

import { errorResponse, jsonResponse, never, stubApi } from "../../test/api";
import { renderPage } from "../../test/render";
import type { FailureDetail, FailureSignature, FixedWeek } from "./api";
import { FailurePage } from "./FailurePage";
import { TriagePage } from "./TriagePage";

function signature(overrides: Partial<FailureSignature> = {}): FailureSignature {
  return {
    id: 7,
    team: 1,
    exception: "torch.OutOfMemoryError",
    message: "CUDA out of memory. Tried to allocate <size>.",
    fault: "infra",
    cause: "oom",
    count: 4,
    first_seen: "2026-11-20T10:00:00Z",
    last_seen: "2026-12-02T10:00:00Z",
    status: "open",
    fixed_at: null,
    fixed_by: null,
    fixed_note: "",
    fixed_commit: "",
    regressed_at: null,
    daily: { start: "2026-11-03", counts: [...Array<number>(28).fill(0), 1, 3] },
    ...overrides,
  };
}

function detail(overrides: Partial<FailureDetail> = {}): FailureDetail {
  return {
    ...signature(),
    traceback: "  actors.py:train_step\ntorch.OutOfMemoryError: CUDA out of memory.",
    weekly: { start: "2026-09-14", counts: [...Array<number>(11).fill(0), 4] },
    failures: [
      {
        run: 12,
        run_name: "grpo-big",
        run_status: "FAILED",
        project: "default",
        attempt: "0b6f7f0e-1c1e-4d2a-9a59-2f0c8e5d7a11",
        attempt_number: 1,
        failed_at: "2026-12-02T10:00:00Z",
      },
    ],
    example_reason: "Job entrypoint command failed with exit code 1",
    example_log_tail: 'File "/srv/actors.py", line 301, in train_step\ntorch.OutOfMemoryError: CUDA out of memory.',
    ...overrides,
  };
}

const WEEKS: FixedWeek[] = [
  { week: "2026-11-16", fixed: 0, regressed: 0 },
  { week: "2026-11-23", fixed: 2, regressed: 0 },
  { week: "2026-11-30", fixed: 1, regressed: 1 },
];

const TEAMS = {
  count: 1,
  next: null,
  previous: null,
  results: [{ id: 1, slug: "lab", name: "Lab", role: "member", viewers_may_vote: false, created_at: "2026-11-01T00:00:00Z" }],
};

function page(results: FailureSignature[]) {
  return { count: results.length, next: null, previous: null, results };
}

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("the triage page", () => {
  it("lists the team's signatures with their fault, count, sparkline and fix, and the fixes per week", async () => {
    stubApi({
      "GET /api/v1/teams": () => TEAMS,
      "GET /api/v1/teams/1/failures": () =>
        page([
          signature(),
          signature({ id: 8, fault: "workload", cause: "", exception: "KeyError", message: "'reward'", count: 9, status: "regressed" }),
        ]),
      "GET /api/v1/teams/1/failures/fixed-per-week": () => WEEKS,
    });
    renderPage(<TriagePage />, { path: "/teams/1/failures", route: "/teams/:id/failures" });
    const infra = await screen.findByTestId("signature-row-7");
    expect(within(infra).getByTestId("fault").textContent).toBe("infra · out of memory");
    expect(within(infra).getByTestId("count").textContent).toBe("4");
    expect(within(infra).queryByTestId("fix-status")).toBeNull();
    expect(infra.querySelectorAll("rect")).toHaveLength(30);
    const workload = screen.getByTestId("signature-row-8");
    expect(within(workload).getByTestId("fault").textContent).toBe("workload · user code");
    expect(within(workload).getByTestId("fix-status").textContent).toBe("regressed");
    expect((await screen.findByTestId("fixed-per-week")).textContent).toContain("3 in 3 weeks");
  });

  it("asks again with a filter, and says when nothing matches", async () => {
    const api = stubApi({
      "GET /api/v1/teams": () => TEAMS,
      "GET /api/v1/teams/1/failures": (url) => (url.searchParams.get("fault") === "workload" ? page([]) : page([signature()])),
      "GET /api/v1/teams/1/failures/fixed-per-week": () => WEEKS,
    });
    renderPage(<TriagePage />, { path: "/teams/1/failures", route: "/teams/:id/failures" });
    await screen.findByTestId("signature-row-7");
    fireEvent.change(screen.getByTestId("fault-filter"), { target: { value: "workload" } });
    await screen.findByText("No failure signatures match these filters.");
    expect(api.calls.some((c) => c.includes("/teams/1/failures?fault=workload"))).toBe(true);
  });

  it("says so when no signature was fixed in the weeks shown, instead of an empty strip", async () => {
    stubApi({
      "GET /api/v1/teams": () => TEAMS,
      "GET /api/v1/teams/1/failures": () => page([signature()]),
      "GET /api/v1/teams/1/failures/fixed-per-week": () => WEEKS.map((w) => ({ ...w, fixed: 0 })),
    });
    renderPage(<TriagePage />, { path: "/teams/1/failures", route: "/teams/:id/failures" });
    const figure = await screen.findByTestId("fixed-per-week");
    await waitFor(() => expect(figure.textContent).toBe(`No signature marked fixed in the last ${WEEKS.length} weeks.`));
    expect(figure.querySelector("rect")).toBeNull();
  });

  it("switching team starts from the first page and never shows the other team's failures", async () => {
    const two = { ...TEAMS, count: 2, results: [...TEAMS.results, { ...TEAMS.results[0]!, id: 2, slug: "ops", name: "Ops" }] };
    const many = (id: number) => ({ count: 120, next: null, previous: null, results: [signature({ id })] });
    const team2 = never();
    const api = stubApi({
      "GET /api/v1/teams": () => two,
      "GET /api/v1/teams/1/failures": (url) => many(100 + Number(url.searchParams.get("offset"))),
      "GET /api/v1/teams/1/failures/fixed-per-week": () => WEEKS,
      "GET /api/v1/teams/2/failures": () => team2,
      "GET /api/v1/teams/2/failures/fixed-per-week": () => WEEKS,
    });
    const app = (
      <Routes>
        <Route path="/teams/:id/failures" element={<TriagePage />} />
      </Routes>
    );
    renderPage(app, { path: "/teams/1/failures", route: "*" });
    await screen.findByTestId("signature-row-100");
    fireEvent.click(screen.getByRole("button", { name: /next/i }));
    await screen.findByTestId("signature-row-150");
    fireEvent.change(await screen.findByTestId("team-picker"), { target: { value: "2" } });
    await waitFor(() => expect(screen.getByRole("heading").textContent).toBe("Failures of Ops"));
    expect(screen.queryByTestId("signature-row-150")).toBeNull(); // team 1's page is not shown as team 2's
    await waitFor(() => expect(api.calls.some((c) => c.startsWith("GET /api/v1/teams/2/failures?limit=50&offset=0"))).toBe(true));
  });

  it("shows loading, then the error", async () => {
    stubApi({
      "GET /api/v1/teams": () => TEAMS,
      "GET /api/v1/teams/1/failures": () => errorResponse(404, "not_found", "Team 1 not found."),
      "GET /api/v1/teams/1/failures/fixed-per-week": () => never(),
    });
    renderPage(<TriagePage />, { path: "/teams/1/failures", route: "/teams/:id/failures" });
    expect(screen.getByText("Loading…")).toBeTruthy();
    expect((await screen.findByRole("alert")).textContent).toContain("Team 1 not found.");
  });
});

describe("a failure signature", () => {
  it("shows the traceback, the newest log and the failed runs, and marks it fixed", async () => {
    let sent: unknown = null;
    stubApi({
      "GET /api/v1/teams": () => TEAMS,
      "GET /api/v1/failures/7": () => detail(),
      "POST /api/v1/failures/7/fix": () =>
        detail({ status: "fixed", fixed_at: "2026-12-03T09:00:00Z", fixed_by: "bob", fixed_commit: "abcdef1" }),
    });
    const fetcher = globalThis.fetch;
    vi.stubGlobal(
      "fetch",
      vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
        if (init?.method === "POST") sent = JSON.parse(String(init.body));
        return fetcher(input, init);
      }),
    );
    document.cookie = "csrftoken=t";
    renderPage(<FailurePage />, { path: "/failures/7", route: "/failures/:id" });
    expect((await screen.findByTestId("traceback")).textContent).toContain("actors.py:train_step");
    expect(screen.getByTestId("log-tail").textContent).toContain('File "/srv/actors.py", line 301');
    expect(screen.getByRole("link", { name: "#12 grpo-big" }).getAttribute("href")).toBe("/runs/12");
    fireEvent.change(await screen.findByTestId("fix-commit"), { target: { value: "not a hash" } });
    fireEvent.click(screen.getByTestId("fix-submit"));
    expect(await screen.findByText("a commit hash: 7 to 64 hex digits")).toBeTruthy();
    expect(sent).toBeNull();
    fireEvent.change(screen.getByTestId("fix-commit"), { target: { value: "abcdef1" } });
    fireEvent.change(screen.getByTestId("fix-note"), { target: { value: "smaller batch" } });
    fireEvent.click(screen.getByTestId("fix-submit"));
    await waitFor(() => expect(screen.getByTestId("fix-status").textContent).toBe("fixed"));
    expect(sent).toEqual({ note: "smaller batch", commit: "abcdef1" });
    expect(screen.getByTestId("fixed").textContent).toContain("by bob");
    expect(screen.getByTestId("unfix")).toBeTruthy();
  });

  it("shows the server's field error of a refused fix", async () => {
    stubApi({
      "GET /api/v1/teams": () => TEAMS,
      "GET /api/v1/failures/7": () => detail(),
      "POST /api/v1/failures/7/fix": () =>
        jsonResponse({ error: "validation_error", message: "note: too long", fields: { note: ["too long here"] } }, 400),
    });
    document.cookie = "csrftoken=t";
    renderPage(<FailurePage />, { path: "/failures/7", route: "/failures/:id" });
    fireEvent.click(await screen.findByTestId("fix-submit"));
    expect(await screen.findByText("too long here")).toBeTruthy();
  });

  it("lets a viewer read but not mark fixed", async () => {
    stubApi({
      "GET /api/v1/teams": () => ({ ...TEAMS, results: [{ ...TEAMS.results[0]!, role: "viewer" }] }),
      "GET /api/v1/failures/7": () => detail({ status: "regressed", fixed_at: "2026-11-30T09:00:00Z", regressed_at: "2026-12-02T10:00:00Z" }),
    });
    renderPage(<FailurePage />, { path: "/failures/7", route: "/failures/:id" });
    expect((await screen.findByTestId("regressed")).textContent).not.toBe("");
    expect(await screen.findByText("Members of the team mark failures fixed.")).toBeTruthy();
    expect(screen.queryByTestId("fix-form")).toBeNull();
  });
});
