import { describe, expect, it } from "vitest";

import type { Sample } from "../../api/types";
import {
  acrossVersions,
  clearedFilters,
  collapse,
  filtersFromSearch,
  formatChange,
  highlight,
  isFiltered,
  isNewestPage,
  NO_FILTERS,
  pageLabel,
  promptTrend,
  queryFor,
  rewardParts,
  agentTurns,
  searchWithFilters,
  wasTruncated,
  type SampleFilters,
} from "./sampleBrowser";

function sample(id: number, step: number, response: string, reward: Sample["reward"], tokens: number | null): Sample {
  return {
    id,
    step,
    prompt: "What is 2+2?",
    response,
    reward,
    prompt_tokens: 6,
    response_tokens: tokens,
    weight_version: step,
    extra: {},
    created_at: "2026-11-30T10:00:00Z",
  };
}

describe("the browser's view in the URL", () => {
  it("reads its own parameters and leaves out what it does not know", () => {
    const search = new URLSearchParams(
      "samples.min_step=10&samples.max_reward=0.5&samples.q=Boxed&samples.order=-tokens&samples.page=3&samples.prompt=42&start=5",
    );
    expect(filtersFromSearch(search)).toEqual({
      ...NO_FILTERS,
      min_step: "10",
      max_reward: "0.5",
      q: "Boxed",
      order: "-tokens",
      page: 2,
      prompt: 42,
    });
    const odd = new URLSearchParams("samples.order=length&samples.page=0&samples.prompt=-3&samples.page=x");
    expect(filtersFromSearch(odd)).toEqual(NO_FILTERS);
    expect(filtersFromSearch(new URLSearchParams(`samples.q=${"a".repeat(300)}`)).q).toHaveLength(200);
  });

  it("writes only what differs from the defaults, keeping the page's other parameters", () => {
    const before = new URLSearchParams("tab=charts&samples.q=old&samples.page=4&x=1&x=2");
    const filters: SampleFilters = { ...NO_FILTERS, min_tokens: " 100 ", q: "x+y", order: "reward", page: 1 };
    const after = searchWithFilters(before, filters);
    expect(after.toString()).toBe(
      "tab=charts&x=1&x=2&samples.min_tokens=100&samples.q=x%2By&samples.order=reward&samples.page=2",
    );
    expect(filtersFromSearch(after)).toEqual({ ...filters, min_tokens: "100" });
    expect(searchWithFilters(after, NO_FILTERS).toString()).toBe("tab=charts&x=1&x=2");
  });

  it("tells filters from the order and page, and clears only filters", () => {
    expect(isFiltered(NO_FILTERS)).toBe(false);
    expect(isFiltered({ ...NO_FILTERS, order: "reward", page: 3 })).toBe(false);
    expect(isFiltered({ ...NO_FILTERS, max_step: "9" })).toBe(true);
    expect(isFiltered({ ...NO_FILTERS, q: " " })).toBe(true);
    const busy: SampleFilters = { ...NO_FILTERS, min_reward: "1", q: "x", order: "-reward", page: 2 };
    expect(clearedFilters(busy)).toEqual({ ...NO_FILTERS, order: "-reward" });
  });
});

describe("queryFor", () => {
  it("asks the API for the filters as numbers, with the page as an offset", () => {
    const filters: SampleFilters = {
      ...NO_FILTERS,
      min_step: "100",
      max_step: "200",
      min_reward: "-0.5",
      max_reward: "1e0",
      min_tokens: "0",
      max_tokens: "512",
      q: "boxed",
      order: "-reward",
      page: 2,
    };
    expect(queryFor(filters, 40)).toEqual({
      query: {
        limit: 40,
        offset: 80,
        min_step: 100,
        max_step: 200,
        min_reward: -0.5,
        max_reward: 1,
        min_tokens: 0,
        max_tokens: 512,
        q: "boxed",
        order: "-reward",
      },
      problems: {},
    });
  });

  it("names each bound that is no number, or below its lower bound, and asks nothing", () => {
    const plan = queryFor(
      {
        ...NO_FILTERS,
        min_step: "1.5",
        max_reward: "abc",
        min_tokens: "-1",
        max_tokens: "99999999999",
      },
      40,
    );
    expect(plan.query).toBeNull();
    expect(Object.keys(plan.problems).sort()).toEqual(["max_reward", "max_tokens", "min_step", "min_tokens"]);
    const crossed = queryFor({ ...NO_FILTERS, min_reward: "0.9", max_reward: "0.1" }, 40);
    expect(crossed).toEqual({ query: null, problems: { max_reward: "at least the lower bound (0.9)" } });
    expect(queryFor({ ...NO_FILTERS, min_reward: "Infinity" }, 40).problems.min_reward).toBeDefined();
  });

  it("knows the plain newest page, which live updates refresh", () => {
    expect(isNewestPage(queryFor(NO_FILTERS, 40).query!)).toBe(true);
    expect(isNewestPage(queryFor({ ...NO_FILTERS, page: 1 }, 40).query!)).toBe(false);
    expect(isNewestPage(queryFor({ ...NO_FILTERS, order: "step" }, 40).query!)).toBe(false);
  });
});

describe("highlight", () => {
  it("marks every match, whatever its case, and keeps the text whole", () => {
    const segments = highlight("Four. FOUR! four", "four");
    expect(segments).toEqual([
      { text: "Four", match: true },
      { text: ". ", match: false },
      { text: "FOUR", match: true },
      { text: "! ", match: false },
      { text: "four", match: true },
    ]);
    expect(segments.map((s) => s.text).join("")).toBe("Four. FOUR! four");
  });

  it("takes the search as text, not a pattern", () => {
    expect(highlight("a.b(c)*", "(c)*")).toEqual([
      { text: "a.b", match: false },
      { text: "(c)*", match: true },
    ]);
    expect(highlight("abc", "")).toEqual([{ text: "abc", match: false }]);
    expect(highlight("", "a")).toEqual([]);
  });
});

describe("collapse", () => {
  const limits = { chars: 100, lines: 3 };

  it("leaves a short text whole", () => {
    expect(collapse("short\ntext", "", limits)).toEqual({ parts: ["short\ntext"], collapsed: false });
  });

  it("keeps the head of a long text, cut at characters or lines", () => {
    expect(collapse("x".repeat(250), "", limits)).toEqual({ parts: ["x".repeat(100)], collapsed: true });
    expect(collapse("1\n2\n3\n4\n5", "", limits)).toEqual({ parts: ["1\n2\n3"], collapsed: true });
  });

  it("keeps the first search hit in view when it lies past the head", () => {
    const text = `${"a".repeat(300)}NEEDLE${"b".repeat(300)}`;
    const shown = collapse(text, "needle", limits);
    expect(shown.collapsed).toBe(true);
    expect(shown.parts).toHaveLength(2);
    expect(shown.parts[0]).toBe("a".repeat(50));
    expect(shown.parts[1]).toBe(`${"a".repeat(25)}NEEDLE${"b".repeat(25)}`);
    const words = `${"lorem ipsum ".repeat(30)}the NEEDLE is here ${"dolor sit ".repeat(30)}`;
    const [, around] = collapse(words, "needle", limits).parts;
    expect(around).toMatch(/^(lorem|ipsum) .*NEEDLE.* (dolor|sit)$/);
    // A hit inside the head needs nothing more.
    expect(collapse(`NEEDLE${"b".repeat(300)}`, "needle", limits).parts).toEqual([`NEEDLE${"b".repeat(94)}`]);
  });
});

describe("a sample's extras", () => {
  it("reads the reward's parts and the truncation flag the job sent", () => {
    expect(rewardParts({ parts: { correct: 1, format: 0.5, broken: "NaN" }, truncated: true })).toEqual([
      ["correct", 1],
      ["format", 0.5],
    ]);
    expect(rewardParts({})).toEqual([]);
    expect(rewardParts({ parts: [1, 2] })).toEqual([]);
    expect(rewardParts(null)).toEqual([]);
    expect(wasTruncated({ truncated: true })).toBe(true);
    expect(wasTruncated({ truncated: "yes" })).toBe(false);
    expect(wasTruncated([])).toBe(false);
  });

  it("reads an agent episode's turns, and nothing from turns of another shape", () => {
    const turns = [
      { role: "model", text: "calc:12*34\n", tokens: 11 },
      { role: "tool", text: "408\n", tool: "calc", kind: "ok", ms: 12.5 },
      { role: "model", text: "408" },
    ];
    expect(agentTurns({ turns })).toEqual([
      { role: "model", text: "calc:12*34\n" },
      { role: "tool", text: "408\n", tool: "calc", kind: "ok", ms: 12.5 },
      { role: "model", text: "408" },
    ]);
    expect(agentTurns({})).toEqual([]);
    expect(agentTurns({ turns: "calc" })).toEqual([]);
    expect(agentTurns({ turns: [{ role: "user", text: "hi" }] })).toEqual([]);
    expect(agentTurns({ turns: [{ role: "model" }] })).toEqual([]);
    expect(agentTurns(null)).toEqual([]);
  });
});

describe("acrossVersions", () => {
  it("orders a prompt's samples by step with what changed since the one before", () => {
    const steps = acrossVersions([
      sample(7, 20, "The answer is 4", 0.5, 8),
      sample(3, 0, "4", 1, 3),
      sample(5, 10, "Four. FOUR! FOUR!", 1, 240),
      sample(9, 30, "The answer is 4", null, 8),
    ]);
    expect(steps.map((s) => [s.sample.id, s.rewardChange, s.tokensChange, s.unchanged])).toEqual([
      [3, null, null, false],
      [5, 0, 237, false],
      [7, -0.5, -232, false],
      [9, null, 0, true],
    ]);
    expect(promptTrend(steps)).toEqual({ reward: { first: 1, last: 0.5 }, tokens: { first: 3, last: 8 } });
  });

  it("has no trend from fewer than two values, and ignores non-finite rewards", () => {
    const steps = acrossVersions([sample(1, 0, "a", "NaN", null), sample(2, 1, "b", 0.25, 4)]);
    expect(steps[1]?.rewardChange).toBeNull();
    expect(promptTrend(steps)).toEqual({ reward: null, tokens: null });
  });
});

describe("labels", () => {
  it("signs changes and counts pages", () => {
    expect(formatChange(0.25, 2)).toBe("+0.25");
    expect(formatChange(-3)).toBe("−3");
    expect(formatChange(0)).toBe("±0");
    expect(pageLabel(1, 40, 40, 1234)).toBe("41–80 of 1,234");
    expect(pageLabel(0, 40, 0, 0)).toBe("0 samples");
  });
});
