import { act, cleanup, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

import { EVAL_GENERATING_REFETCH_MS } from "../../api/hooks";
import type { Team } from "../../api/types";
import { evalDetail, ranking, stubApi } from "../../test/api";
import { renderPage } from "../../test/render";
import { EvalPage } from "./EvalPage";
import { EvalsPage } from "./EvalsPage";

function team(role: Team["role"]): Team {
  return { id: 1, slug: "lab", name: "Lab", role, viewers_may_vote: false, created_at: "2026-11-30T09:00:00Z" };
}

function session(username: string) {
  return { user: { id: 1, username } };
}

function renderEval() {
  return renderPage(<EvalPage />, { path: "/evals/3", route: "/evals/:id" });
}

afterEach(() => {
  cleanup();
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

describe("the eval page", () => {
  it("shows the ranking with bootstrap 95 % intervals", async () => {
    stubApi({
      "GET /api/v1/evals/3": () => evalDetail(),
      "GET /api/v1/evals/3/ranking": () => ranking(),
      "GET /api/v1/session": () => session("someone-else"),
      "GET /api/v1/teams/1": () => team("member"),
    });
    renderEval();
    const row = await screen.findByTestId("ranking-row-grpo-arith@step-60");
    const cells = within(row).getAllByRole("cell").map((c) => c.textContent);
    expect(cells).toEqual(["1", "grpo-arith@step-60", "1012 [987, 1040]", "7"]);
    expect(screen.getByTestId("interval-note").textContent).toContain("bootstrap 95 %");
    expect(screen.getByTestId("vote-link").getAttribute("href")).toBe("/evals/3/vote");
    // Neither the creator nor an admin: no Close button.
    await screen.findByText(/10 votes on 12 battles/);
    expect(screen.queryByTestId("close-eval")).toBeNull();
  });

  it("offers Close to the eval's creator and to a team admin", async () => {
    stubApi({
      "GET /api/v1/evals/3": () => evalDetail({ created_by: "demo" }),
      "GET /api/v1/evals/3/ranking": () => ranking(),
      "GET /api/v1/session": () => session("demo"),
      "GET /api/v1/teams/1": () => team("viewer"),
    });
    renderEval();
    expect(await screen.findByTestId("close-eval")).toBeTruthy();
    cleanup();
    vi.unstubAllGlobals();

    stubApi({
      "GET /api/v1/evals/3": () => evalDetail({ created_by: "demo" }),
      "GET /api/v1/evals/3/ranking": () => ranking(),
      "GET /api/v1/session": () => session("alice"),
      "GET /api/v1/teams/1": () => team("admin"),
    });
    renderEval();
    expect(await screen.findByTestId("close-eval")).toBeTruthy();
  });

  it("follows the generation's progress while GENERATING, without a ranking or a vote link", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    let generations = 10;
    const api = stubApi({
      "GET /api/v1/evals/3": () =>
        evalDetail({
          status: "GENERATING",
          progress: { generations, expected: 40, battles: 0, votes: 0, prompts: 20, prompts_covered: 0 },
        }),
      "GET /api/v1/session": () => session("demo"),
      "GET /api/v1/teams/1": () => team("member"),
    });
    renderEval();
    expect((await screen.findByTestId("eval-progress")).textContent).toBe("10 / 40 responses (25 %)");
    expect(screen.getByTestId("generating")).toBeTruthy();
    expect(screen.queryByTestId("vote-link")).toBeNull();
    expect(screen.queryByTestId("ranking-table")).toBeNull();

    generations = 30;
    await act(() => vi.advanceTimersByTimeAsync(EVAL_GENERATING_REFETCH_MS));
    expect((await screen.findByTestId("eval-progress")).textContent).toBe("30 / 40 responses (75 %)");
    expect(api.callsTo("/api/v1/evals/3/ranking")).toBe(0);
  });

  it("shows why the generation failed", async () => {
    stubApi({
      "GET /api/v1/evals/3": () => evalDetail({ status: "FAILED", failure_reason: "CUDA out of memory" }),
      "GET /api/v1/session": () => session("demo"),
      "GET /api/v1/teams/1": () => team("member"),
    });
    renderEval();
    expect((await screen.findByTestId("eval-failure")).textContent).toContain("CUDA out of memory");
  });
});

describe("the evals page", () => {
  it("lists the evals, each linking to its page", async () => {
    stubApi({
      "GET /api/v1/evals": () => ({
        count: 2,
        next: null,
        previous: null,
        results: [evalDetail(), evalDetail({ id: 4, name: "second", status: "GENERATING", created_by: "alice" })],
      }),
    });
    renderPage(<EvalsPage />, { path: "/evals", route: "/evals" });
    const row = await screen.findByTestId("eval-row-4");
    expect(within(row).getByRole("link").getAttribute("href")).toBe("/evals/4");
    expect(row.textContent).toContain("alice");
    expect(row.textContent).toContain("40 / 40 responses");
    expect(screen.getByTestId("eval-status-3").textContent).toBe("OPEN");
  });
});
