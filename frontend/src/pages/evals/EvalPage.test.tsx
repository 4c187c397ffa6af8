import { act, cleanup, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { EVAL_GENERATING_REFETCH_MS, RANKING_REFETCH_MS } from "../../api/hooks";
import type { EvalProgress, PublicRanking, Team } from "../../api/types";
import { evalDetail, ranking, stubApi } from "../../test/api";
import { renderPage } from "../../test/render";
import { FakeWebSocket } from "../../test/websocket";
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

beforeEach(() => {
  FakeWebSocket.opened = [];
  vi.stubGlobal("WebSocket", FakeWebSocket);
});

afterEach(() => {
  cleanup();
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

const PROGRESS: EvalProgress = { generations: 40, expected: 40, battles: 12, votes: 7, prompts: 20, prompts_covered: 8 };

/** The server's side of the eval's socket: accepted, then its snapshot (the page is live from there). */
function liveSocket(status: "OPEN" | "GENERATING" = "OPEN"): FakeWebSocket {
  const socket = FakeWebSocket.latest();
  socket.accept();
  socket.send({ type: "eval.snapshot", eval_id: 3, status, failure_reason: "", closed_at: null, progress: PROGRESS });
  return socket;
}

function pushed(overrides: Partial<PublicRanking> = {}): PublicRanking {
  const { flagged_voters: _flagged, ...rest } = ranking();
  return { ...rest, ...overrides };
}

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
    // The length-controlled column waits for its first fit.
    expect(cells).toEqual(["1", "grpo-arith@step-60", "1012 [987, 1040]", "…", "7"]);
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
    vi.stubGlobal("WebSocket", FakeWebSocket);

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

describe("the eval page, live", () => {
  it("subscribes to the eval's socket, patches the ranking from its pushes and stops polling", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    const api = stubApi({
      "GET /api/v1/evals/3": () => evalDetail(),
      "GET /api/v1/evals/3/ranking": () => ranking(),
      "GET /api/v1/session": () => session("someone-else"),
      "GET /api/v1/teams/1": () => team("member"),
    });
    renderEval();
    await screen.findByTestId("ranking-row-grpo-arith@step-60");
    expect(FakeWebSocket.latest().url).toBe("ws://localhost:3000/ws/evals/3/");
    liveSocket();
    expect(await screen.findByTestId("live")).toBeTruthy();
    const before = { ranking: api.callsTo("/api/v1/evals/3/ranking"), detail: api.callsTo("/api/v1/evals/3") };
    await act(() => vi.advanceTimersByTimeAsync(RANKING_REFETCH_MS * 3));
    expect(api.callsTo("/api/v1/evals/3/ranking")).toBe(before.ranking);
    expect(api.callsTo("/api/v1/evals/3")).toBe(before.detail);

    // A vote elsewhere: the pushed ranking replaces the shown one, without a fetch.
    FakeWebSocket.latest().send({
      type: "ranking.updated",
      eval_id: 3,
      ranking: pushed({
        votes: 8,
        rows: [
          { label: "grpo-arith@step-20", score: 1030, ci_low: 1001, ci_high: 1060, rank: 1, battles: 8 },
          { label: "grpo-arith@step-60", score: 970, ci_low: 940, ci_high: 999, rank: 2, battles: 8 },
        ],
      }),
    });
    const row = await screen.findByTestId("ranking-row-grpo-arith@step-20");
    expect(within(row).getAllByRole("cell")[2]?.textContent).toBe("1030 [1001, 1060]");
    expect(screen.getByTestId("interval-note").textContent).toContain("from 8 votes");
    expect(api.callsTo("/api/v1/evals/3/ranking")).toBe(before.ranking);

    // An older push (two refreshes crossing) changes nothing.
    FakeWebSocket.latest().send({ type: "ranking.updated", eval_id: 3, ranking: pushed({ votes: 7 }) });
    expect(within(screen.getByTestId("ranking-row-grpo-arith@step-20")).getAllByRole("cell")[0]?.textContent).toBe(
      "1",
    );

    // Progress and status arrive the same way.
    FakeWebSocket.latest().send({ type: "eval.progress", eval_id: 3, progress: { ...PROGRESS, votes: 8 } });
    expect((await screen.findByTestId("eval-progress")).textContent).toContain("8 votes");
    FakeWebSocket.latest().send({
      type: "eval.status",
      eval_id: 3,
      status: "CLOSED",
      failure_reason: "",
      closed_at: "2026-11-30T12:00:00Z",
      progress: { ...PROGRESS, votes: 8 },
    });
    expect((await screen.findByTestId("eval-status")).textContent).toBe("CLOSED");
    expect(screen.queryByTestId("vote-link")).toBeNull();
  });

  it("keeps the flagged voters of a manager's ranking and refetches them when votes move", async () => {
    let flagged = ["mallory"];
    const api = stubApi({
      "GET /api/v1/evals/3": () => evalDetail({ created_by: "demo" }),
      "GET /api/v1/evals/3/ranking": () => ranking({ flagged_voters: flagged }),
      "GET /api/v1/session": () => session("demo"),
      "GET /api/v1/teams/1": () => team("member"),
    });
    renderEval();
    expect((await screen.findByTestId("flagged-voters")).textContent).toContain("mallory");
    liveSocket();
    const fetched = api.callsTo("/api/v1/evals/3/ranking");
    flagged = ["mallory", "oscar"];
    FakeWebSocket.latest().send({ type: "ranking.updated", eval_id: 3, ranking: pushed({ votes: 9 }) });
    // Shown at once with the list it had, then the list as REST gives it to a manager.
    await vi.waitFor(() => expect(api.callsTo("/api/v1/evals/3/ranking")).toBe(fetched + 1));
    await vi.waitFor(() => expect(screen.getByTestId("flagged-voters").textContent).toContain("oscar"));
  });

  it("shows no flagged voters to a teammate who does not manage the eval", async () => {
    stubApi({
      "GET /api/v1/evals/3": () => evalDetail(),
      "GET /api/v1/evals/3/ranking": () => ranking(),
      "GET /api/v1/session": () => session("someone-else"),
      "GET /api/v1/teams/1": () => team("member"),
    });
    renderEval();
    await screen.findByTestId("analysis");
    expect(screen.queryByTestId("flagged-voters")).toBeNull();
  });

  it("shows the win-rate matrix, the voters' agreement and the length-controlled scores", async () => {
    stubApi({
      "GET /api/v1/evals/3": () => evalDetail(),
      "GET /api/v1/evals/3/ranking": () =>
        ranking({
          alpha: 0.72,
          length_controlled: {
            votes: 7,
            beta: 0.05,
            rows: [
              { label: "grpo-arith@step-20", score: 1004.2, ci_low: 980, ci_high: 1030, rank: 1, battles: 7 },
              { label: "grpo-arith@step-60", score: 995.8, ci_low: 970, ci_high: 1020, rank: 1, battles: 7 },
            ],
          },
        }),
      "GET /api/v1/session": () => session("someone-else"),
      "GET /api/v1/teams/1": () => team("member"),
    });
    renderEval();
    const row = await screen.findByTestId("ranking-row-grpo-arith@step-60");
    // The raw score and, beside it, the one with the length preference taken out.
    expect(within(row).getAllByRole("cell").map((c) => c.textContent)).toEqual([
      "1",
      "grpo-arith@step-60",
      "1012 [987, 1040]",
      "996 [970, 1020]",
      "7",
    ]);
    expect(screen.getByTestId("length-note").textContent).toContain("voters favour longer responses");
    expect(screen.getByTestId("agreement").textContent).toContain("α = 0.72: tentative");
    // Rows in ranking order; step-60 took 60 % of the score against step-20.
    const best = within(screen.getByTestId("win-rate-row-grpo-arith@step-60")).getAllByRole("cell");
    expect(best.map((c) => c.textContent)).toEqual(["", "60 %"]);
    const other = within(screen.getByTestId("win-rate-row-grpo-arith@step-20")).getAllByRole("cell");
    expect(other.map((c) => c.textContent)).toEqual(["40 %", ""]);
  });

  it("follows the generation's progress pushed over the socket, without polling", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    const generating = { generations: 10, expected: 40, battles: 0, votes: 0, prompts: 20, prompts_covered: 0 };
    const api = stubApi({
      "GET /api/v1/evals/3": () => evalDetail({ status: "GENERATING", progress: generating }),
      "GET /api/v1/session": () => session("demo"),
      "GET /api/v1/teams/1": () => team("member"),
    });
    renderEval();
    expect((await screen.findByTestId("eval-progress")).textContent).toBe("10 / 40 responses (25 %)");
    const socket = FakeWebSocket.latest();
    socket.accept();
    socket.send({
      type: "eval.snapshot",
      eval_id: 3,
      status: "GENERATING",
      failure_reason: "",
      closed_at: null,
      progress: generating,
    });
    const fetched = api.callsTo("/api/v1/evals/3");
    socket.send({ type: "eval.progress", eval_id: 3, progress: { ...generating, generations: 30 } });
    expect((await screen.findByTestId("eval-progress")).textContent).toBe("30 / 40 responses (75 %)");
    await act(() => vi.advanceTimersByTimeAsync(EVAL_GENERATING_REFETCH_MS * 3));
    expect(api.callsTo("/api/v1/evals/3")).toBe(fetched);
    // The socket drops: the page polls again until it is back, then refetches what it missed.
    socket.drop(1006);
    await act(() => vi.advanceTimersByTimeAsync(EVAL_GENERATING_REFETCH_MS));
    expect(api.callsTo("/api/v1/evals/3")).toBeGreaterThan(fetched);
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
