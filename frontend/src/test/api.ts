/**
 * Test doubles for the API: a stubbed global fetch that answers by method and path, and
 * fixtures typed with the generated schema types, so that their shape is the API's.
 */
import { vi } from "vitest";

import type { Battle, Eval, Ranking, RunDetail, RunPage, RunSummary, VoteResult } from "../api/types";

/** What a route answers: a JSON body (200), a Response, or a promise of either. */
export type Route = (url: URL) => unknown;

export interface StubbedApi {
  /** Every call, as "GET /api/v1/runs?limit=50", in order. */
  calls: string[];
  /** Calls to one path (query left out), whatever the method. */
  callsTo(path: string): number;
}

/** A JSON answer with a status, as the server writes it. */
export function jsonResponse(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}

/** The server's error body (controlplane.api.ErrorSerializer). */
export function errorResponse(status: number, error: string, message: string): Response {
  return jsonResponse({ error, message }, status);
}

/** An answer that never comes: the page stays in its loading state. */
export function never(): Promise<never> {
  return new Promise<never>(() => undefined);
}

/**
 * Replace the global fetch with one that answers from `routes`, keyed "GET /api/v1/runs"
 * (method and path, no query). Anything else answers 404, as the server would.
 */
export function stubApi(routes: Record<string, Route>): StubbedApi {
  const calls: string[] = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
      const url = new URL(String(input), "http://localhost");
      const method = init?.method ?? "GET";
      calls.push(`${method} ${url.pathname}${url.search}`);
      const route = routes[`${method} ${url.pathname}`];
      if (!route) return errorResponse(404, "not_found", `No stub for ${method} ${url.pathname}.`);
      const answer = await route(url);
      return answer instanceof Response ? answer : jsonResponse(answer);
    }),
  );
  return {
    calls,
    callsTo: (path) => calls.filter((call) => call.split(" ")[1]?.split("?")[0] === path).length,
  };
}

export function runSummary(overrides: Partial<RunSummary> = {}): RunSummary {
  return {
    id: 5,
    name: "grpo-arith",
    recipe: "grpo",
    status: "RUNNING",
    tags: ["demo"],
    project: {
      id: 1,
      name: "arith",
      description: "",
      team: { id: 1, slug: "lab", name: "Lab" },
      created_at: "2026-11-30T09:00:00Z",
    },
    created_by: "demo",
    created_at: "2026-11-30T10:00:00Z",
    updated_at: "2026-11-30T10:00:05Z",
    started_at: "2026-11-30T10:00:02Z",
    finished_at: null,
    earlier_attempts_s: 0,
    failure_reason: "",
    waiting_for: "",
    waiting_since: null,
    priority: 0,
    queue: {},
    groups: [],
    ...overrides,
  };
}

export function runDetail(overrides: Partial<RunDetail> = {}): RunDetail {
  return {
    ...runSummary(),
    config: { steps: 60 },
    params: {},
    log_tail: "",
    cloned_from: null,
    attempts: [],
    ...overrides,
  };
}

/** One page of a list endpoint, everything on it. */
export function runPage(results: RunSummary[]): RunPage {
  return { count: results.length, next: null, previous: null, results };
}

// ---------------------------------------------------------------- evals

export function evalDetail(overrides: Partial<Eval> = {}): Eval {
  return {
    id: 3,
    name: "grpo checkpoints",
    project: runSummary().project,
    eval_set: 2,
    status: "OPEN",
    failure_reason: "",
    created_by: "demo",
    created_at: "2026-11-30T11:00:00Z",
    closed_at: null,
    samples_per_prompt: 1,
    min_voters_per_prompt: 1,
    generation_run: 9,
    candidates: ["grpo-arith@step-20", "grpo-arith@step-60"],
    progress: { generations: 40, expected: 40, battles: 12, votes: 10, prompts: 20, prompts_covered: 8 },
    ...overrides,
  };
}

export function battle(overrides: Partial<Battle> = {}): Battle {
  return {
    battle: "6f1c2d9e-0000-4000-8000-000000000001",
    prompt: { text: "What is 17 + 25?", reference: "42" },
    a: "17 + 25 = 42.",
    b: "It is 43.",
    guidelines: "Prefer the correct answer; brevity breaks ties.",
    ...overrides,
  };
}

export function voteResult(choice: VoteResult["vote"]["choice"] = "a"): VoteResult {
  return {
    battle: battle().battle,
    vote: { choice, comment: "", created_at: "2026-11-30T11:05:00Z" },
    reveal: {
      a: { label: "grpo-arith@step-60", run: 5, step: 60 },
      b: { label: "grpo-arith@step-20", run: 5, step: 20 },
    },
  };
}

export function ranking(overrides: Partial<Ranking> = {}): Ranking {
  return {
    rows: [
      { label: "grpo-arith@step-60", score: 1012.4, ci_low: 987.2, ci_high: 1040.1, rank: 1, battles: 7 },
      { label: "grpo-arith@step-20", score: 987.6, ci_low: 960, ci_high: 1013, rank: 1, battles: 7 },
    ],
    labels: ["grpo-arith@step-20", "grpo-arith@step-60"],
    win_rate: [
      [null, 0.4],
      [0.6, null],
    ],
    votes: 7,
    alpha: null,
    flagged_voters: null,
    length_controlled: null,
    ...overrides,
  };
}
