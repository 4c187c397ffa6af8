/** Fixtures and a two-route render for the eval-set, new-eval and responses tests. */
import { QueryClientProvider } from "@tanstack/react-query";
import { render } from "@testing-library/react";
import type { ReactElement } from "react";
import { MemoryRouter, Route, Routes, useLocation } from "react-router";

import type { Checkpoint, EvalSet, EvalSetDetail, Team } from "../../api/types";
import { createQueryClient } from "../../queryClient";
import { jsonResponse } from "../../test/api";

export function team(role: Team["role"], overrides: Partial<Team> = {}): Team {
  return { id: 1, slug: "lab", name: "Lab", role, viewers_may_vote: false, created_at: "2026-11-30T09:00:00Z", ...overrides };
}

export function page<T>(results: T[]) {
  return { count: results.length, next: null, previous: null, results };
}

export function evalSet(overrides: Partial<EvalSet> = {}): EvalSet {
  return {
    id: 2,
    team: { id: 1, slug: "lab", name: "Lab" },
    name: "arith",
    description: "Two-number sums",
    guidelines: "Prefer the correct answer.",
    prompt_count: 2,
    created_by: "demo",
    created_at: "2026-11-30T09:30:00Z",
    ...overrides,
  };
}

export function evalSetDetail(overrides: Partial<EvalSetDetail> = {}): EvalSetDetail {
  return {
    ...evalSet(),
    prompts: [
      { id: 11, position: 1, text: "What is 17 + 25?", reference: "42", tags: ["sum", "easy"] },
      { id: 12, position: 2, text: "What is 9 + 10?", reference: "", tags: [] },
    ],
    ...overrides,
  };
}

export function checkpoint(id: number, run: number, step: number): Checkpoint {
  return {
    id,
    run,
    attempt: null,
    step,
    uri: `file:///ckpt/${run}/step-${step}`,
    weight_version: step,
    metrics: {},
    created_at: "2026-11-30T10:00:00Z",
    human: null,
    proxy_reward: null,
  };
}

/** A 201 as the server writes it. */
export function created(body: unknown): Response {
  return jsonResponse(body, 201);
}

/** A 400 with field paths, as controlplane.api writes it. */
export function invalid(fields: Record<string, string[]>): Response {
  const parts = Object.entries(fields).map(([path, messages]) => `${path}: ${messages[0]}`);
  return jsonResponse({ error: "validation_error", message: `Invalid input — ${parts.join("; ")}`, fields }, 400);
}

function Where() {
  const location = useLocation();
  return <p data-testid="landed">{location.pathname}</p>;
}

/** `element` at `route`, the browser at `path`; any other path shows where the app went. */
export function renderRoutes(element: ReactElement, { path, route }: { path: string; route: string }) {
  const queryClient = createQueryClient();
  const defaults = queryClient.getDefaultOptions();
  queryClient.setDefaultOptions({ ...defaults, queries: { ...defaults.queries, retry: false } });
  return render(
    <QueryClientProvider client={queryClient}>
      <MemoryRouter initialEntries={[path]}>
        <Routes>
          <Route path={route} element={element} />
          <Route path="*" element={<Where />} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

/** The JSON bodies sent to `path` with `method`, in order. */
export function sentBodies(calls: [RequestInfo | URL, RequestInit?][], method: string, path: string): unknown[] {
  return calls
    .filter(([input, init]) => (init?.method ?? "GET") === method && new URL(String(input), "http://localhost").pathname === path)
    .map(([, init]) => JSON.parse(String(init?.body)));
}
