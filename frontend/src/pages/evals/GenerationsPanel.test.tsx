import { cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

import type { Generation, Ranking } from "../../api/types";
import { evalDetail, stubApi } from "../../test/api";
import { renderPage } from "../../test/render";
import { EvalResponsesPage, groupByPrompt, pageSize } from "./GenerationsPanel";
import { evalSetDetail, page } from "./testing";

const LABELS = ["grpo-arith@step-20", "grpo-arith@step-60"];

function generation(prompt: number, candidate: string, text: string, sample = 0): Generation {
  return { id: `${prompt}-${candidate}-${sample}`, prompt, candidate, sample, text, tokens: text.length };
}

const RESPONSES = [
  generation(11, LABELS[0]!, "It is 43."),
  generation(11, LABELS[1]!, "17 + 25 = 42."),
  generation(12, LABELS[0]!, "19"),
  generation(12, LABELS[1]!, "9 + 10 = 19."),
];

function renderResponses() {
  return renderPage(<EvalResponsesPage />, { path: "/evals/3/responses", route: "/evals/:id/responses" });
}

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("a closed eval's responses", () => {
  it("shows nothing and asks for nothing while the eval is open", async () => {
    const api = stubApi({
      "GET /api/v1/evals/3": () => evalDetail({ status: "OPEN" }),
      "GET /api/v1/evals/3/generations": () => page(RESPONSES),
      "GET /api/v1/eval-sets/2": () => evalSetDetail(),
    });
    renderResponses();
    expect((await screen.findByTestId("generations-closed-only")).textContent).toContain("once the eval is closed");
    expect(screen.queryByTestId("generations")).toBeNull();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(api.callsTo("/api/v1/evals/3/generations")).toBe(0);
    const text = document.body.textContent ?? "";
    for (const label of LABELS) expect(text).not.toContain(label);
    for (const response of RESPONSES) expect(text).not.toContain(response.text);
  });

  it("shows every prompt with each candidate's response side by side once closed", async () => {
    const api = stubApi({
      "GET /api/v1/evals/3": () => evalDetail({ status: "CLOSED", closed_at: "2026-11-30T12:00:00Z" }),
      "GET /api/v1/evals/3/generations": () => page(RESPONSES),
      "GET /api/v1/eval-sets/2": () => evalSetDetail(),
    });
    renderResponses();
    const first = await screen.findByTestId("generations-prompt-11");
    await waitFor(() => expect(first.textContent).toContain("What is 17 + 25?"));
    expect(first.textContent).toContain("Reference: 42");
    expect(within(screen.getByTestId(`generation-11-${LABELS[1]}`)).getByText("17 + 25 = 42.")).toBeTruthy();
    expect(screen.getByTestId(`generation-11-${LABELS[0]}`).textContent).toContain(LABELS[0]);
    expect(screen.getByTestId("generations-prompt-12").textContent).toContain("9 + 10 = 19.");
    expect(api.calls).toContain("GET /api/v1/evals/3/generations?offset=0&limit=10");
  });

  it("pages through the responses a whole number of prompts at a time", async () => {
    const api = stubApi({
      "GET /api/v1/evals/3": () => evalDetail({ status: "CLOSED" }),
      "GET /api/v1/evals/3/generations": (url) => ({
        count: 24,
        next: null,
        previous: null,
        results: url.searchParams.get("offset") === "0" ? RESPONSES.slice(0, 2) : RESPONSES.slice(2),
      }),
      "GET /api/v1/eval-sets/2": () => evalSetDetail(),
    });
    renderResponses();
    expect((await screen.findByTestId("generations-page")).textContent).toBe("page 1 of 3");
    fireEvent.click(screen.getByTestId("generations-next"));
    await screen.findByTestId("generations-prompt-12");
    expect(screen.getByTestId("generations-page").textContent).toBe("page 2 of 3");
    expect(api.calls).toContain("GET /api/v1/evals/3/generations?offset=10&limit=10");
  });
});

describe("the responses' paging", () => {
  it("fits whole prompts in a page, within the API's 500", () => {
    expect(pageSize({ candidates: ["a", "b"], samples_per_prompt: 1 })).toBe(10);
    expect(pageSize({ candidates: Array.from({ length: 64 }, String), samples_per_prompt: 8 })).toBe(500);
    expect(pageSize({ candidates: Array.from({ length: 40 }, String), samples_per_prompt: 4 })).toBe(480);
  });

  it("groups a page by prompt, then candidate", () => {
    const groups = groupByPrompt([...RESPONSES, generation(12, LABELS[1]!, "again", 1)]);
    expect(groups.map((g) => g.prompt)).toEqual([11, 12]);
    expect(groups[1]?.byCandidate.get(LABELS[1]!)?.map((g) => g.text)).toEqual(["9 + 10 = 19.", "again"]);
  });
});

describe("the eval page's way to the responses", () => {
  it("links to them once the eval is closed, and not before", async () => {
    const { EvalPage } = await import("./EvalPage");
    const routesFor = (status: "OPEN" | "CLOSED") => ({
      "GET /api/v1/evals/3": () => evalDetail({ status }),
      "GET /api/v1/evals/3/ranking": () =>
        ({
          rows: [],
          labels: [],
          win_rate: [],
          votes: 0,
          alpha: null,
          flagged_voters: null,
          length_controlled: null,
        }) satisfies Ranking,
      "GET /api/v1/session": () => ({ user: { id: 1, username: "someone" } }),
    });
    stubApi(routesFor("CLOSED"));
    renderPage(<EvalPage />, { path: "/evals/3", route: "/evals/:id" });
    expect((await screen.findByTestId("responses-link")).getAttribute("href")).toBe("/evals/3/responses");
    cleanup();
    vi.unstubAllGlobals();

    stubApi(routesFor("OPEN"));
    renderPage(<EvalPage />, { path: "/evals/3", route: "/evals/:id" });
    await screen.findByTestId("vote-link");
    expect(screen.queryByTestId("responses-link")).toBeNull();
  });
});
