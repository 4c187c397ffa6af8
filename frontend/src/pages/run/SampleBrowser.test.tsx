import { act, cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { useLocation } from "react-router";

import { queryKeys } from "../../api/queryKeys";
import type { Sample, SamplePage } from "../../api/types";
import { errorResponse, never, stubApi, type Route } from "../../test/api";
import { renderPage } from "../../test/render";
import { SampleBrowser } from "./SampleBrowser";
import type { SampleSummary } from "./samplesApi";

const SAMPLES = "GET /api/v1/runs/5/samples";
const SUMMARY = "GET /api/v1/runs/5/samples/summary";

function sample(id: number, step: number, response: string, reward: Sample["reward"], tokens: number | null, extra: unknown = {}): Sample {
  return {
    id,
    step,
    prompt: id % 2 ? "What is 2+2?" : "Name a prime.",
    response,
    reward,
    prompt_tokens: 6,
    response_tokens: tokens,
    weight_version: step,
    extra,
    created_at: "2026-11-30T10:00:00Z",
  };
}

const NEWEST = [
  sample(5, 2, "The answer is 4", 0.5, 8, { parts: { correct: 0.5, format: 0 }, truncated: false }),
  sample(4, 2, "7", 1, 1),
  sample(3, 1, "Four. FOUR! four!", 1, 240, { truncated: true }),
  sample(1, 0, "4", 1, 3),
];

function page(results: Sample[], count = results.length, next: string | null = null): SamplePage {
  return { count, next, previous: null, results };
}

const RANGES: SampleSummary = {
  count: 4,
  min_step: 0,
  max_step: 2,
  min_reward: 0.5,
  max_reward: 1,
  min_tokens: 1,
  max_tokens: 240,
  weight_versions: 3,
};

/** The query of a call, without the path: "limit=40&q=four". */
function queries(calls: string[], path = "/api/v1/runs/5/samples"): string[] {
  return calls.filter((c) => c.split(" ")[1]?.split("?")[0] === path).map((c) => c.split("?")[1] ?? "");
}

function api(samples: Route = () => page(NEWEST), summary: Route = () => RANGES) {
  return stubApi({ [SAMPLES]: samples, [SUMMARY]: summary });
}

function Location() {
  const location = useLocation();
  return <p data-testid="location">{location.search}</p>;
}

function renderBrowser(search = "") {
  return renderPage(
    <>
      <SampleBrowser runId={5} />
      <Location />
    </>,
    { path: `/runs/5${search}`, route: "/runs/:id" },
  );
}

function location(): URLSearchParams {
  return new URLSearchParams(screen.getByTestId("location").textContent ?? "");
}

function rows(): HTMLElement[] {
  return within(screen.getByTestId("samples")).queryAllByRole("row").slice(1); // the header's row
}

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  vi.useRealTimers();
});

describe("the sample browser", () => {
  it("shows nothing for a run that kept no samples, and asks for no ranges", async () => {
    const calls = api(() => page([])).calls;
    renderBrowser();
    await waitFor(() => expect(calls).toHaveLength(1));
    expect(screen.queryByTestId("samples")).toBeNull();
    expect(queries(calls, "/api/v1/runs/5/samples/summary")).toEqual([]);
  });

  it("shows the newest samples with their step, version, reward, parts and length", async () => {
    const calls = api().calls;
    renderBrowser();
    await waitFor(() => expect(rows()).toHaveLength(4));
    const first = rows()[0]!;
    expect(first.textContent).toContain("The answer is 4");
    expect(first.textContent).toContain("What is 2+2?");
    expect(within(first).getByRole("list", { name: "reward parts" }).textContent).toBe("correct 0.500format 0");
    expect(within(rows()[2]!).getByText("truncated")).toBeTruthy();
    await waitFor(() => expect(screen.getByText(/4 kept · steps 0–2 · 3 weight versions/)).toBeTruthy());
    expect(screen.getByLabelText("Reward: from").getAttribute("placeholder")).toBe("0.5");
    expect(screen.getByLabelText("Length (tokens): to").getAttribute("placeholder")).toBe("240");
    expect(queries(calls)).toEqual(["limit=40"]);
    expect(screen.queryByRole("button", { name: "Clear filters" })).toBeNull();
  });

  it("filters by a range at Enter, keeping the page's other URL parameters", async () => {
    const calls = api((url) =>
      url.searchParams.get("min_reward") === "0.75" ? page(NEWEST.filter((s) => s.reward === 1)) : page(NEWEST),
    ).calls;
    renderBrowser("?tab=charts");
    await waitFor(() => expect(rows()).toHaveLength(4));
    const from = screen.getByLabelText("Reward: from");
    fireEvent.change(from, { target: { value: "0.75" } });
    fireEvent.submit(from.closest("form")!);
    await waitFor(() => expect(rows().map((r) => r.dataset.sample)).toEqual(["4", "3", "1"]));
    expect(queries(calls)).toContain("limit=40&min_reward=0.75");
    expect(location().get("samples.min_reward")).toBe("0.75");
    expect(location().get("tab")).toBe("charts");
    expect(screen.getByTestId("samples-page").textContent).toBe("1–3 of 3");
  });

  it("searches once typing pauses, and marks the matches", async () => {
    const calls = api((url) => (url.searchParams.get("q") === "four" ? page([NEWEST[2]!]) : page(NEWEST))).calls;
    renderBrowser();
    await waitFor(() => expect(rows()).toHaveLength(4));
    const box = screen.getByTestId("samples-q");
    for (const typed of ["f", "fo", "fou", "four"]) fireEvent.change(box, { target: { value: typed } });
    await waitFor(() => expect(rows().map((r) => r.dataset.sample)).toEqual(["3"]), { timeout: 2000 });
    // One request for the whole word, none for what was typed on the way.
    expect(queries(calls).filter((q) => q.includes("q="))).toEqual(["limit=40&q=four"]);
    const marks = [...rows()[0]!.querySelectorAll("mark")].map((m) => m.textContent);
    expect(marks).toEqual(["Four", "FOUR", "four"]);
    expect(location().get("samples.q")).toBe("four");
  });

  it("says what is wrong with a bound beside it, and asks nothing with it", async () => {
    const calls = api().calls;
    renderBrowser();
    await waitFor(() => expect(rows()).toHaveLength(4));
    const from = screen.getByLabelText("Steps: from");
    fireEvent.change(from, { target: { value: "1.5" } });
    fireEvent.submit(from.closest("form")!);
    expect(from.getAttribute("aria-invalid")).toBe("true");
    expect(screen.getByText("from: a whole number, 0 or more")).toBeTruthy();
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(queries(calls)).toEqual(["limit=40"]);
    expect(location().get("samples.min_step")).toBeNull();
  });

  it("says when nothing matches, and clears the filters with one button", async () => {
    api((url) => (url.searchParams.has("min_tokens") ? page([]) : page(NEWEST)));
    renderBrowser("?samples.min_tokens=1000&samples.order=-reward&other=1");
    const empty = await screen.findByTestId("samples-empty");
    expect(empty.textContent).toContain("No samples match these filters.");
    expect((screen.getByLabelText("Length (tokens): from") as HTMLInputElement).value).toBe("1000");
    fireEvent.click(within(empty).getByRole("button", { name: "Clear filters" }));
    await waitFor(() => expect(rows()).toHaveLength(4));
    expect(location().toString()).toBe("other=1&samples.order=-reward");
    expect((screen.getByLabelText("Length (tokens): from") as HTMLInputElement).value).toBe("");
  });

  it("shows the API's refusal of a filter, naming it", async () => {
    api((url) =>
      url.searchParams.has("q")
        ? new Response(JSON.stringify({ error: "invalid", message: "q is 300 characters; at most 200.", fields: { q: ["at most 200"] } }), {
            status: 400,
          })
        : page(NEWEST),
    );
    renderBrowser("?samples.q=boom");
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toContain("Cannot load these samples: q is 300 characters; at most 200.");
    expect(within(alert).getByText("q")).toBeTruthy();
  });

  it("shows a loading row while a filtered page comes, and the run's error when the newest cannot", async () => {
    api((url) => (url.searchParams.has("order") ? never() : page(NEWEST)));
    renderBrowser("?samples.order=reward");
    await waitFor(() => expect(rows().map((r) => r.textContent)).toEqual(["Loading…"]));
    cleanup();
    api(() => errorResponse(500, "error", "Database unavailable."));
    renderBrowser();
    expect((await screen.findByRole("alert")).textContent).toBe("Cannot load rollout samples: Database unavailable.");
  });

  it("pages on the server, and sets a single step from a row", async () => {
    const calls = api((url) => {
      const offset = Number(url.searchParams.get("offset") ?? 0);
      return page(offset ? [sample(11, 0, "older", 0, 2)] : NEWEST, 41, offset ? null : "next");
    }).calls;
    renderBrowser();
    await waitFor(() => expect(rows()).toHaveLength(4));
    expect(screen.getByTestId("samples-page").textContent).toBe("1–4 of 41 · page 1/2");
    fireEvent.click(screen.getByRole("button", { name: "Next →" }));
    // The newest rows stay, marked, until the next page comes.
    expect(screen.getByText("updating…").getAttribute("role")).toBe("status");
    expect(rows()).toHaveLength(4);
    await waitFor(() => expect(rows().map((r) => r.dataset.sample)).toEqual(["11"]));
    expect(queries(calls)).toContain("limit=40&offset=40");
    expect(location().get("samples.page")).toBe("2");
    fireEvent.click(screen.getByRole("button", { name: "Only step 0" }));
    await waitFor(() => expect(location().get("samples.min_step")).toBe("0"));
    expect(location().get("samples.max_step")).toBe("0");
    expect(location().get("samples.page")).toBeNull();
  });

  it("collapses a long response and expands it on request", async () => {
    const long = `${"step by step. ".repeat(60)}The answer is 4.`;
    api(() => page([sample(1, 0, long, 1, 300)]));
    renderBrowser();
    const expand = await screen.findByRole("button", { name: /Show the whole response/ });
    const cell = rows()[0]!;
    expect(cell.textContent).not.toContain("The answer is 4.");
    expect(expand.getAttribute("aria-expanded")).toBe("false");
    fireEvent.click(expand);
    expect(cell.textContent).toContain("The answer is 4.");
    expect(screen.getByRole("button", { name: "Show less of the response" }).getAttribute("aria-expanded")).toBe("true");
  });

  it("opens one prompt's samples across steps and weight versions side by side, and goes back", async () => {
    const across = [
      sample(1, 0, "4", 1, 3),
      sample(3, 1, "Four. FOUR! four!", 1, 240, { truncated: true }),
      sample(5, 2, "The answer is 4", 0.5, 8),
      sample(7, 3, "The answer is 4", 0.5, 8),
    ];
    const calls = api((url) => (url.searchParams.has("prompt_of") ? page(across) : page(NEWEST))).calls;
    renderBrowser("?samples.q=four");
    await waitFor(() => expect(rows()).toHaveLength(4));
    const row = rows().find((r) => r.textContent?.includes("Four. FOUR!"))!;
    fireEvent.click(within(row).getByRole("button", { name: "Across versions" }));
    const view = await screen.findByTestId("samples-same-prompt");
    await waitFor(() => expect(within(view).getAllByTestId("version-card")).toHaveLength(4));
    expect(queries(calls)).toContain("prompt_of=3&order=step&limit=200");
    expect(location().get("samples.prompt")).toBe("3");
    expect(location().get("samples.q")).toBe("four");
    const cards = within(view).getAllByTestId("version-card");
    expect(cards.map((c) => c.querySelector("strong")?.textContent)).toEqual(["step 0", "step 1", "step 2", "step 3"]);
    expect(within(cards[1]!).getByText("opened from here")).toBeTruthy();
    expect(cards[1]!.textContent).toContain("+237");
    expect(cards[2]!.textContent).toContain("−0.50");
    expect(within(cards[3]!).getByText("same response as the step before")).toBeTruthy();
    expect(cards[1]!.querySelectorAll("mark")).toHaveLength(3);
    expect(screen.getByTestId("samples-trend").textContent).toBe(
      "4 samples of this prompt, steps 0–3 · reward 1 → 0.500 · length 3 tokens → 8 tokens",
    );
    fireEvent.click(screen.getByRole("checkbox", { name: "hide the 1 that repeat the step before" }));
    expect(within(view).getAllByTestId("version-card").map((c) => c.querySelector("strong")?.textContent)).toEqual([
      "step 0",
      "step 1",
      "step 2",
    ]);
    expect(document.activeElement?.textContent).toBe("One prompt across steps and weight versions");
    fireEvent.keyDown(view, { key: "Escape" });
    await waitFor(() => expect(rows()).toHaveLength(4));
    expect(location().get("samples.prompt")).toBeNull();
    expect(location().get("samples.q")).toBe("four");
  });

  it("opens a shared link to one prompt's versions, and says so when the sample is not the run's", async () => {
    api((url) =>
      url.searchParams.get("prompt_of") === "99"
        ? errorResponse(404, "not_found", "prompt_of: run 5 has no sample 99.")
        : page(NEWEST),
    );
    renderBrowser("?samples.prompt=99");
    expect((await screen.findByRole("alert")).textContent).toBe(
      "Cannot load this prompt's samples: prompt_of: run 5 has no sample 99.",
    );
    fireEvent.click(screen.getByTestId("samples-back"));
    await waitFor(() => expect(rows()).toHaveLength(4));
  });

  it("refreshes a filtered first page when new samples come, and leaves later pages alone", async () => {
    let newer = false;
    const calls = api((url) => {
      const rowsNow = newer ? [sample(9, 3, "new four", 1, 2), ...NEWEST] : NEWEST;
      return url.searchParams.has("q") ? page(rowsNow.filter((s) => s.response.toLowerCase().includes("four"))) : page(rowsNow);
    }).calls;
    const { queryClient } = renderBrowser("?samples.q=four");
    await waitFor(() => expect(rows()).toHaveLength(1));
    newer = true;
    // What refreshSamplesSoon does on `samples.added`.
    await act(() => queryClient.invalidateQueries({ queryKey: queryKeys.samples(5), exact: true }));
    await waitFor(() => expect(rows()).toHaveLength(2));
    expect(rows()[0]!.textContent).toContain("new four");
    expect(queries(calls).filter((q) => q === "limit=40&q=four")).toHaveLength(2);
    await waitFor(() => expect(queries(calls, "/api/v1/runs/5/samples/summary")).toHaveLength(2));

  });

  it("leaves a later page where it is when new samples come", async () => {
    const calls = api((url) => page(url.searchParams.has("offset") ? [sample(11, 0, "older", 0, 2)] : NEWEST, 41, null)).calls;
    const { queryClient } = renderBrowser("?samples.page=2");
    await waitFor(() => expect(rows()).toHaveLength(1));
    await act(() => queryClient.invalidateQueries({ queryKey: queryKeys.samples(5), exact: true }));
    await waitFor(() => expect(queries(calls).filter((q) => q === "limit=40")).toHaveLength(2));
    expect(queries(calls).filter((q) => q.includes("offset=40"))).toHaveLength(1);
  });
});


describe("an agent episode", () => {
  it("shows every turn, the tool's replies labelled with what the call came to", async () => {
    const turns = [
      { role: "model", text: "calc:12*34\n" },
      { role: "tool", text: "408\n", tool: "calc", kind: "ok", ms: 12.4 },
      { role: "model", text: "calc:(1\n" },
      { role: "tool", text: "error\n", tool: "calc", kind: "program_error", ms: 30 },
      { role: "model", text: "408\n" },
      { role: "tool", text: "no tool named\n", tool: "calc", kind: "format", ms: 0 },
      { role: "model", text: "408" },
    ];
    const episode = sample(9, 3, turns.map((t) => t.text).join(""), 1, 20, { parts: { correct: 1 }, turns });
    api(() => page([episode]));
    renderBrowser();
    const list = await screen.findByRole("list", { name: "7 turns" });
    const items = within(list).getAllByRole("listitem");
    expect(items.map((li) => li.className)).toEqual([
      "model-turn",
      "tool-turn",
      "model-turn",
      "tool-turn",
      "model-turn",
      "tool-turn",
      "model-turn",
    ]);
    expect(within(items[1]!).getByText("calc · ok · 12 ms")).toBeTruthy();
    expect(within(items[3]!).getByText("calc · program_error · 30 ms").className).toBe("tag danger");
    expect(within(items[5]!).getByText("calc · format").className).toBe("tag danger"); // nothing ran: no time
    expect(items[6]!.textContent).toContain("408");
  });
});
