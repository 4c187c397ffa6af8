import { act, cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

import { errorResponse, never, stubApi } from "../../test/api";
import { renderPage } from "../../test/render";
import { AUDIT_PAGE_SIZE, QUEUE_REFETCH_MS, type Admission, type Preemption } from "./api";
import { AuditSection } from "./AuditSection";

const NOW = Date.now();
const ago = (seconds: number) => new Date(NOW - seconds * 1000).toISOString();

function admission(overrides: Partial<Admission> = {}): Admission {
  return {
    id: 40,
    run: 12,
    run_name: "queue-holder",
    owner: "alice",
    attempt: 1,
    status: "RUNNING",
    demand: { CPU: 1 },
    borrowed: false,
    admitted_at: ago(300),
    waited_s: 12.4,
    ...overrides,
  };
}

function preemption(overrides: Partial<Preemption> = {}): Preemption {
  const reason = "run 15 of lab waits; this run borrows other's share";
  return {
    id: 3,
    run: 9,
    run_name: "grpo-borrower",
    attempt: 1,
    team: "other",
    for_run: 15,
    for_team: "lab",
    reason,
    requested_at: ago(600),
    stopped_after_step: 12,
    outcome: `preempted (${reason}); it stopped after step 12; resumes from its checkpoint of step 10`,
    ...overrides,
  };
}

function page<T>(results: T[], count = results.length, next: string | null = null) {
  return { count, next, previous: null, results };
}

const ADMISSIONS = "GET /api/v1/teams/1/admissions";
const PREEMPTIONS = "GET /api/v1/teams/1/preemptions";

function render() {
  return renderPage(<AuditSection teamId={1} now={NOW} />, { path: "/teams/1/queue", route: "/teams/:id/queue" });
}

afterEach(() => {
  cleanup();
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

describe("the team's audit", () => {
  it("lists its admissions: the run linked, when, the wait, what it reserved, borrowed or not", async () => {
    const api = stubApi({
      [ADMISSIONS]: () =>
        page([
          admission(),
          admission({ id: 39, run: 11, run_name: "borrower", attempt: 2, borrowed: true, waited_s: 250, demand: { CPU: 2, GPU: 1 }, status: "SUCCEEDED" }),
        ]),
      [PREEMPTIONS]: () => page([]),
    });
    render();
    const rows = await screen.findAllByTestId("admission");
    expect(api.calls).toContain(`${ADMISSIONS}?limit=${AUDIT_PAGE_SIZE}&offset=0`);
    const [first, second] = rows as [HTMLElement, HTMLElement];
    expect(within(first).getByRole("link", { name: "#12 queue-holder" }).getAttribute("href")).toBe("/runs/12");
    const cells = [...first.querySelectorAll("td")];
    expect(cells.map((td) => td.textContent)).toEqual(["#12 queue-holder", "alice", "5 min ago", "12 s", "1 CPU", "no", "RUNNING"]);
    expect(cells[2]!.getAttribute("title")).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d$/);
    expect([...second.querySelectorAll("td")].map((td) => td.textContent)).toEqual([
      "#11 borrower attempt 2",
      "alice",
      "5 min ago",
      "4 min",
      "2 CPU, 1 GPU",
      "borrowed",
      "SUCCEEDED",
    ]);
    // Both lists are counted on their tabs; two rows need no pager.
    expect(screen.getByRole("tab", { name: "Admissions 2" }).getAttribute("aria-selected")).toBe("true");
    await waitFor(() => expect(screen.getByRole("tab", { name: "Preemptions 0" })).toBeTruthy());
    expect(screen.queryByRole("button", { name: "Show more" })).toBeNull();
  });

  it("lists its preemptions on the other tab: the run stopped, for which run, why, when, and at which step", async () => {
    stubApi({
      [ADMISSIONS]: () => page([admission()]),
      [PREEMPTIONS]: () =>
        page([
          preemption({ id: 5, run: 14, run_name: "low-prio", team: "lab", for_run: 16, stopped_after_step: null, outcome: "", requested_at: ago(20) }),
          preemption({ id: 4, run: 13, run_name: "reported", team: "lab", for_run: null, outcome: "" }),
          preemption(),
        ]),
    });
    render();
    const tab = await screen.findByRole("tab", { name: "Preemptions 3" });
    expect(screen.queryByTestId("audit-preemptions")?.closest("[role=tabpanel]")?.hasAttribute("hidden")).toBe(true);
    fireEvent.click(tab);
    expect(tab.getAttribute("aria-selected")).toBe("true");
    const panel = screen.getByRole("tabpanel");
    const [stopping, reported, done] = within(panel).getAllByTestId("preemption") as [HTMLElement, HTMLElement, HTMLElement];
    expect([...done.querySelectorAll("td")].map((td) => td.textContent)).toEqual([
      "#9 grpo-borrowerother · attempt 1",
      "#15 of lab",
      "run 15 of lab waits; this run borrows other's share",
      "10 min ago",
      "it stopped after step 12; resumes from its checkpoint of step 10",
    ]);
    expect(within(done).getByRole("link", { name: "#9 grpo-borrower" }).getAttribute("href")).toBe("/runs/9");
    expect(within(done).getByRole("link", { name: "#15" }).getAttribute("href")).toBe("/runs/15");
    expect(within(done).getByTestId("preemption-outcome").getAttribute("title")).toMatch(/^preempted \(run 15/);
    expect(within(reported).getByTestId("preemption-outcome").textContent).toBe("stopped after step 12");
    expect(within(reported).getByText("a deleted run")).toBeTruthy();
    expect(within(stopping).getByTestId("preemption-outcome").textContent).toBe("stopping…");
    expect(within(stopping).getByText("just now")).toBeTruthy();
    // The arrow keys move between the tabs.
    fireEvent.keyDown(tab, { key: "ArrowRight" });
    expect(screen.getByRole("tab", { name: "Admissions 1" }).getAttribute("aria-selected")).toBe("true");
  });

  it("shows more a page at a time, newest first, without repeating a row that moved down a page", async () => {
    const rows = Array.from({ length: 25 }, (_, i) => admission({ id: 100 - i, run: 100 - i, run_name: `run-${i}` }));
    const api = stubApi({
      [ADMISSIONS]: (url) => {
        const offset = Number(url.searchParams.get("offset"));
        // A new admission arrived between the pages: the second starts one row earlier.
        const from = offset === 0 ? 0 : offset - 1;
        const next = offset === 0 ? "http://testserver/api/v1/teams/1/admissions?limit=20&offset=20" : null;
        return page(rows.slice(from, from + AUDIT_PAGE_SIZE), 25, next);
      },
      [PREEMPTIONS]: () => page([]),
    });
    render();
    expect(await screen.findAllByTestId("admission")).toHaveLength(20);
    expect(screen.getByText("20 of 25, newest first")).toBeTruthy();
    fireEvent.click(screen.getByRole("button", { name: "Show more" }));
    await waitFor(() => expect(screen.getAllByTestId("admission")).toHaveLength(25));
    expect(api.calls).toContain(`${ADMISSIONS}?limit=${AUDIT_PAGE_SIZE}&offset=20`);
    const ids = screen.getAllByTestId("admission").map((r) => Number(r.getAttribute("data-run")));
    expect(ids).toEqual(rows.map((r) => r.run));
    expect(screen.queryByRole("button", { name: "Show more" })).toBeNull();
    expect(screen.getByText("25 of 25, newest first")).toBeTruthy();
    expect(screen.getByRole("button", { name: "Refresh" })).toBeTruthy();
  });

  it("asks for its first page again with the queue, and nothing on its own once older pages show", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    const rows = Array.from({ length: 30 }, (_, i) => admission({ id: 100 - i, run: 100 - i }));
    const api = stubApi({
      [ADMISSIONS]: (url) => {
        const offset = Number(url.searchParams.get("offset"));
        return page(rows.slice(offset, offset + AUDIT_PAGE_SIZE), 30, offset === 0 ? "http://testserver/next" : null);
      },
      [PREEMPTIONS]: () => page([]),
    });
    const asked = () => api.calls.filter((c) => c.startsWith(ADMISSIONS));
    render();
    await screen.findAllByTestId("admission");
    expect(asked()).toHaveLength(1);
    await act(() => vi.advanceTimersByTimeAsync(QUEUE_REFETCH_MS + 100));
    expect(asked()).toEqual([`${ADMISSIONS}?limit=20&offset=0`, `${ADMISSIONS}?limit=20&offset=0`]);

    fireEvent.click(screen.getByRole("button", { name: "Show more" }));
    await waitFor(() => expect(screen.getAllByTestId("admission")).toHaveLength(30));
    const before = asked().length;
    await act(() => vi.advanceTimersByTimeAsync(5 * QUEUE_REFETCH_MS));
    expect(asked()).toHaveLength(before);
    // Refresh asks for each page shown, once.
    fireEvent.click(screen.getByRole("button", { name: "Refresh" }));
    await waitFor(() => expect(asked()).toHaveLength(before + 2));
    expect(asked().slice(-2)).toEqual([`${ADMISSIONS}?limit=20&offset=0`, `${ADMISSIONS}?limit=20&offset=20`]);
  });

  it("says it is loading, then that there is nothing yet, or the API's error", async () => {
    stubApi({ [ADMISSIONS]: () => never(), [PREEMPTIONS]: () => page([]) });
    render();
    expect(within(screen.getByTestId("audit-admissions")).getByText("Loading…")).toBeTruthy();
    cleanup();

    stubApi({ [ADMISSIONS]: () => page([]), [PREEMPTIONS]: () => errorResponse(500, "server_error", "The database is away.") });
    render();
    expect(await screen.findByText("The scheduler has admitted none of this team's runs yet.")).toBeTruthy();
    fireEvent.click(screen.getByRole("tab", { name: "Preemptions" }));
    await waitFor(() => expect(screen.getByRole("alert").textContent).toContain("The database is away."));
    expect(screen.queryByText(/No run of this team was preempted/)).toBeNull();
  });
});
