/**
 * Test doubles for the API: a stubbed global fetch that answers by method and path, and
 * fixtures typed with the generated schema types, so that their shape is the API's.
 */
import { vi } from "vitest";

import type { RunDetail, RunPage, RunSummary } from "../api/types";

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
