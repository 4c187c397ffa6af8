import { cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { RunGroupDetail } from "../../api/types";
import { errorResponse, jsonResponse, never, runDetail, runSummary, stubApi } from "../../test/api";
import { created, invalid, page, renderRoutes, sentBodies } from "../evals/testing";
import type { Recipe } from "./api";
import { GRPO_SCHEMA, SMOKE_SCHEMA } from "./fixtures";
import { SubmitPage } from "./SubmitPage";

const PROJECT = runSummary().project; // lab/arith

const RECIPES: Recipe[] = [
  { name: "smoke", description: "A few Ray tasks per step that report metrics.", config_schema: { ...SMOKE_SCHEMA } },
  { name: "grpo", description: "GRPO with PPO clipping on Ray.", config_schema: { ...GRPO_SCHEMA } },
];

/** A grpo run's resolved config, as GET /runs/{id} gives it: every default filled, a seed chosen. */
const GRPO_CONFIG = {
  seed: 1234,
  steps: 60,
  model: { path: null, tiny: { hidden_size: 64, heads: 4 } },
  task: { name: "arithmetic", digits: 2, ops: ["+"] },
  reward: { weights: { correct: 1, format: 0 } },
  algorithm: {
    lr: 0.0005,
    group_size: 8,
    clip_eps: 0.2,
    reference: true,
    tis_cap: 2,
    mode: "sync",
    async_buffer_prompts: null,
  },
  trainer_device: "auto",
  fail_at_step: null,
};

function group(id: number): RunGroupDetail {
  return {
    id,
    name: "pace",
    kind: "sweep",
    project: PROJECT,
    recipe: "smoke",
    config: {},
    grid: { tasks_per_step: [1, 2] },
    seeds: [0, 1, 2],
    created_by: "demo",
    created_at: "2026-12-01T10:00:00Z",
    run_count: 6,
    runs: [],
  };
}

beforeEach(() => {
  document.cookie = "csrftoken=test-token";
});

afterEach(() => {
  cleanup();
  document.cookie = "csrftoken=; expires=Thu, 01 Jan 1970 00:00:00 GMT";
  vi.unstubAllGlobals();
});

function routes(extra: Record<string, (url: URL) => unknown> = {}) {
  return stubApi({
    "GET /api/v1/recipes": () => RECIPES,
    "GET /api/v1/projects": () => page([PROJECT]),
    "POST /api/v1/runs": () => created(runDetail({ id: 42, recipe: "smoke" })),
    ...extra,
  });
}

function renderSubmit(path = "/runs/new") {
  return renderRoutes(<SubmitPage />, { path, route: "/runs/new" });
}

function input(testId: string): HTMLInputElement {
  return screen.getByTestId(testId) as HTMLInputElement;
}

function type(testId: string, value: string) {
  fireEvent.change(screen.getByTestId(testId), { target: { value } });
}

/** The form, once the recipes and the projects are in. */
async function ready() {
  await screen.findByTestId("submit-form");
  await waitFor(() => expect(input("submit-project").value).toBe("lab/arith"));
}

function requestsTo(method: string, path: string): RequestInit[] {
  return vi
    .mocked(fetch)
    .mock.calls.filter(([url, init]) => (init?.method ?? "GET") === method && new URL(String(url), "http://localhost").pathname === path)
    .map(([, init]) => init ?? {});
}

function keyOf(init: RequestInit): string | undefined {
  return (init.headers as Record<string, string> | undefined)?.["Idempotency-Key"];
}

describe("the submit page's states", () => {
  it("says it is loading the recipes", async () => {
    routes({ "GET /api/v1/recipes": () => never() });
    renderSubmit();
    expect((await screen.findByTestId("submit-loading")).textContent).toBe("Loading recipes…");
    expect(screen.queryByTestId("submit-form")).toBeNull();
  });

  it("says when the recipes cannot be loaded, and asks again on Try again", async () => {
    let answers = 0;
    const api = routes({
      "GET /api/v1/recipes": () => (++answers === 1 ? errorResponse(500, "server_error", "The database is down.") : RECIPES),
    });
    renderSubmit();
    const box = await screen.findByRole("alert");
    expect(box.textContent).toBe("Cannot load the recipes: The database is down.");
    fireEvent.click(screen.getByTestId("recipes-retry"));
    await screen.findByTestId("submit-form");
    expect(api.callsTo("/api/v1/recipes")).toBe(2);
  });

  it("refuses a clone of something that is not a run id, and of a run no recipe here made", async () => {
    routes({ "GET /api/v1/runs/8": () => runDetail({ id: 8, recipe: "external", config: {} }) });
    renderSubmit("/runs/new?from=abc");
    expect((await screen.findByRole("alert")).textContent).toBe('"abc" is not a run id.');
    cleanup();
    renderSubmit("/runs/new?from=8");
    expect((await screen.findByTestId("cannot-clone")).textContent).toContain("cannot be cloned");
  });
});

describe("a new run", () => {
  it("generates smoke's form and sends only what was changed, then goes to the run", async () => {
    routes();
    renderSubmit();
    await ready();
    // Each field shows its default (placeholder and badge) and its help.
    const steps = input("cfg-input-steps");
    expect([steps.type, steps.placeholder, steps.min, steps.max, steps.step]).toEqual(["number", "20", "1", "1000000", "1"]);
    expect(input("cfg-input-interval_s").step).toBe("any");
    expect(screen.getByTestId("cfg-badge-steps").textContent).toBe("default");
    expect(screen.getByTestId("cfg-field-steps").textContent).toContain("Number of steps to run.");
    expect(input("cfg-input-seed").placeholder).toBe("unset");

    type("cfg-input-steps", "5");
    type("cfg-input-interval_s", "0.2"); // the default typed out: not a change
    expect(screen.getByTestId("cfg-badge-steps").textContent).toBe("changed");
    expect(screen.getByTestId("cfg-badge-interval_s").textContent).toBe("default");
    expect(screen.getByTestId("changed-count").textContent).toBe("1 changed from the defaults");
    type("submit-name", " quick ");
    type("submit-tags", "smoke, ci");
    expect(screen.getByTestId("submit").textContent).toBe("Submit run");
    fireEvent.click(screen.getByTestId("submit"));

    expect((await screen.findByTestId("landed")).textContent).toBe("/runs/42");
    expect(sentBodies(vi.mocked(fetch).mock.calls, "POST", "/api/v1/runs")).toEqual([
      { project: "lab/arith", name: "quick", recipe: "smoke", config: { steps: 5 }, tags: ["smoke", "ci"] },
    ]);
  });

  it("checks values against the schema before sending, and sends nothing while one is wrong", async () => {
    const api = routes();
    renderSubmit();
    await ready();
    type("cfg-input-steps", "0");
    // Shown as typed, before any submit.
    expect(screen.getByTestId("cfg-error-steps").textContent).toBe("must be at least 1");
    type("cfg-input-tasks_per_step", "1.5");
    expect(screen.getByTestId("cfg-error-tasks_per_step").textContent).toBe("must be a whole number, not 1.5");
    type("submit-project", "arith");
    expect(screen.getByTestId("submit-project-error").textContent).toBe("give team/project, such as lab/arith");
    fireEvent.click(screen.getByTestId("submit"));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(api.callsTo("/api/v1/runs")).toBe(0);
    expect(document.activeElement).toBe(input("submit-project"));

    type("submit-project", "lab/new-one");
    expect(screen.getByText("A new project lab/new-one will be made.")).toBeTruthy();
    type("cfg-input-steps", "2");
    type("cfg-input-tasks_per_step", "");
    expect(screen.queryByTestId("cfg-error-steps")).toBeNull();
    fireEvent.click(screen.getByTestId("submit"));
    await screen.findByTestId("landed");
    expect(sentBodies(vi.mocked(fetch).mock.calls, "POST", "/api/v1/runs")[0]).toMatchObject({
      project: "lab/new-one",
      config: { steps: 2 },
    });
  });

  it("shows the server's 400 next to its field and its message on top, until the field is edited", async () => {
    routes({
      "POST /api/v1/runs": () =>
        jsonResponse(
          {
            error: "validation_error",
            message: "Invalid config for recipe 'smoke': config.task_cpus: cluster has 8 CPUs (and 1 more)",
            fields: {
              "config.task_cpus": ["cluster has 8 CPUs"],
              config: ["Value error, tasks_per_step × task_cpus exceeds the cluster"],
              tags: ["at most 50"],
            },
          },
          400,
        ),
    });
    renderSubmit();
    await ready();
    type("cfg-input-task_cpus", "64");
    fireEvent.click(screen.getByTestId("submit"));

    const fieldError = await screen.findByTestId("cfg-server-error-task_cpus");
    expect(fieldError.textContent).toBe("cluster has 8 CPUs");
    expect(within(screen.getByTestId("cfg-field-task_cpus")).getByRole("alert")).toBe(fieldError);
    expect(screen.getByTestId("config-errors").textContent).toBe("Value error, tasks_per_step × task_cpus exceeds the cluster");
    expect(screen.getByTestId("submit-tags-server-error").textContent).toBe("at most 50");
    const top = screen.getByTestId("form-error");
    expect(top.textContent).toContain("The run was not submitted: Invalid config for recipe 'smoke'");
    // Each problem is shown where it is, not listed again on top.
    expect(top.querySelector("ul")).toBeNull();
    expect(screen.queryByTestId("landed")).toBeNull();

    type("cfg-input-task_cpus", "4");
    expect(screen.queryByTestId("cfg-server-error-task_cpus")).toBeNull();
  });

  it("opens the section a rule of the server names, and shows the rule there", async () => {
    routes({
      "POST /api/v1/runs": () =>
        invalid({ "config.model.tiny": ["Value error, heads (3) must divide hidden_size (64)"] }),
    });
    renderSubmit("/runs/new?recipe=grpo");
    await ready();
    expect(input("submit-recipe").value).toBe("grpo");
    // Common sections are open, the others closed until asked.
    expect(screen.getByTestId("section-toggle-algorithm").getAttribute("aria-expanded")).toBe("true");
    const tiny = screen.getByTestId("section-toggle-model.tiny");
    expect(tiny.getAttribute("aria-expanded")).toBe("false");
    expect(screen.queryByTestId("cfg-input-model.tiny.heads")).toBeNull();
    fireEvent.click(tiny);
    type("cfg-input-model.tiny.heads", "3");
    fireEvent.click(tiny);
    expect(screen.queryByTestId("cfg-input-model.tiny.heads")).toBeNull();
    expect(screen.getByTestId("section-model.tiny").textContent).toContain("1 changed");

    fireEvent.click(screen.getByTestId("submit"));
    expect((await screen.findByTestId("section-error-model.tiny")).textContent).toBe(
      "Value error, heads (3) must divide hidden_size (64)",
    );
    expect(screen.getByTestId("section-toggle-model.tiny").getAttribute("aria-expanded")).toBe("true");
    expect(sentBodies(vi.mocked(fetch).mock.calls, "POST", "/api/v1/runs")[0]).toMatchObject({
      recipe: "grpo",
      config: { model: { tiny: { heads: 3 } } },
    });
  });

  it("edits the config as JSON, both ways", async () => {
    routes();
    renderSubmit();
    await ready();
    type("cfg-input-steps", "5");
    fireEvent.click(screen.getByTestId("view-json"));
    const json = input("config-json");
    expect(JSON.parse(json.value)).toEqual({ steps: 5 });
    type("config-json", '{"steps": 7, "interval_s": 0.5, "fail_at_step": 3');
    expect(screen.getByTestId("json-error").textContent).toMatch(/^Not valid JSON/);
    fireEvent.click(screen.getByTestId("view-form"));
    expect(screen.queryByTestId("cfg-input-steps")).toBeNull(); // stays on the JSON until it reads
    type("config-json", '{"steps": 0, "interval_s": 0.5}');
    expect(screen.getByTestId("json-field-errors").textContent).toBe("steps: must be at least 1");
    type("config-json", '{"steps": 7, "interval_s": 0.5, "fail_at_step": 3}');
    fireEvent.click(screen.getByTestId("view-form"));
    expect(input("cfg-input-steps").value).toBe("7");
    expect(input("cfg-input-interval_s").value).toBe("0.5");
    expect(input("cfg-input-fail_at_step").value).toBe("3");
    fireEvent.click(screen.getByTestId("submit"));
    await screen.findByTestId("landed");
    expect(sentBodies(vi.mocked(fetch).mock.calls, "POST", "/api/v1/runs")[0]).toMatchObject({
      config: { steps: 7, interval_s: 0.5, fail_at_step: 3 },
    });
  });
});

describe("a clone with edits", () => {
  it("starts from the run's config, lists the changes, and sends the whole config to the clone endpoint", async () => {
    routes({
      "GET /api/v1/runs/5": () =>
        runDetail({ id: 5, name: "grpo-arith", recipe: "grpo", config: GRPO_CONFIG, tags: ["demo"] }),
      "POST /api/v1/runs/5/clone": () => created(runDetail({ id: 43, recipe: "grpo", cloned_from: 5 })),
    });
    renderSubmit("/runs/new?from=5");
    await screen.findByTestId("submit-form");
    expect(screen.getByRole("heading", { level: 1 }).textContent).toBe("Clone run #5");
    expect(input("cfg-input-algorithm.lr").value).toBe("0.0005");
    expect(input("submit-recipe").disabled).toBe(true);
    expect(input("submit-tags").value).toBe("demo");
    expect(input("submit-name").placeholder).toBe("grpo-arith-clone");
    expect(screen.getByTestId("clone-diff-empty").textContent).toContain("run #5's config as it was");
    expect(screen.getByTestId("submit").textContent).toBe("Clone run #5");

    type("cfg-input-algorithm.lr", "0.001");
    fireEvent.change(screen.getByTestId("cfg-input-algorithm.mode"), { target: { value: "async" } });
    fireEvent.click(screen.getByTestId("cfg-unset-algorithm.tis_cap"));
    const diff = screen.getByTestId("clone-diff");
    expect(within(diff).getAllByRole("listitem").map((li) => li.textContent)).toEqual([
      "algorithm.lr: 0.0005 → 0.001",
      "algorithm.tis_cap: 2 → null",
      'algorithm.mode: "sync" → "async"',
    ]);
    // Back to the run's value: no longer a change.
    type("cfg-input-algorithm.lr", "5e-4");
    expect(screen.queryByTestId("diff-algorithm.lr")).toBeNull();
    type("cfg-input-algorithm.lr", "0.001");

    fireEvent.click(screen.getByTestId("submit"));
    expect((await screen.findByTestId("landed")).textContent).toBe("/runs/43");
    expect(sentBodies(vi.mocked(fetch).mock.calls, "POST", "/api/v1/runs/5/clone")).toEqual([
      {
        name: "",
        config: { ...GRPO_CONFIG, algorithm: { ...GRPO_CONFIG.algorithm, lr: 0.001, mode: "async", tis_cap: null } },
        tags: ["demo"],
      },
    ]);
  });
});

describe("a sweep", () => {
  it("counts the runs before sending, then posts the grid with a key and goes to the group", async () => {
    routes({ "POST /api/v1/sweeps": () => created(group(9)) });
    renderSubmit();
    await ready();
    type("cfg-input-steps", "1");
    type("cfg-input-seed", "7");
    fireEvent.click(screen.getByTestId("sweep-toggle"));
    expect(input("cfg-input-tasks_per_step").type).toBe("text");
    // The seed is the sweep's: one of its seeds per run.
    expect(input("cfg-input-seed").disabled).toBe(true);
    expect(screen.getByTestId("cfg-badge-seed").textContent).toBe("swept");
    type("cfg-input-tasks_per_step", "1, 2");
    expect(screen.getByTestId("cfg-badge-tasks_per_step").textContent).toBe("swept");
    expect(screen.getByTestId("sweep-count").textContent).toBe("2 × 3 seeds = 6 runs");
    // Fields multiply in the form's order.
    type("cfg-input-interval_s", "0, 0.1, 0.2");
    expect(screen.getByTestId("sweep-count").textContent).toBe("3 × 2 × 3 seeds = 18 runs");
    type("sweep-seeds", "2");
    expect(screen.getByTestId("sweep-count").textContent).toBe("3 × 2 × 2 seeds = 12 runs");
    type("cfg-input-interval_s", "0");
    type("sweep-seeds", "3");
    expect(screen.getByTestId("submit").textContent).toBe("Submit sweep (6 runs)");
    type("submit-name", "pace");
    fireEvent.click(screen.getByTestId("submit"));

    expect((await screen.findByTestId("landed")).textContent).toBe("/groups/9");
    const [sent] = requestsTo("POST", "/api/v1/sweeps");
    expect(JSON.parse(String(sent?.body))).toEqual({
      project: "lab/arith",
      name: "pace",
      recipe: "smoke",
      config: { steps: 1, interval_s: 0 },
      tags: [],
      grid: { tasks_per_step: [1, 2] },
      seeds: 3,
    });
    expect(keyOf(sent ?? {})).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it("refuses more runs than a sweep may make, and keeps each field's first value when turned off", async () => {
    const api = routes();
    renderSubmit();
    await ready();
    fireEvent.click(screen.getByTestId("sweep-toggle"));
    type("cfg-input-steps", "1, 2, 3, 4, 5, 6, 7, 8, 9, 10");
    type("cfg-input-tasks_per_step", "1, 2, 3, 4, 5, 6, 7, 8, 9, 10");
    expect(screen.getByTestId("sweep-too-big").textContent).toBe("300 runs: a sweep makes at most 200");
    fireEvent.click(screen.getByTestId("submit"));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(api.callsTo("/api/v1/sweeps")).toBe(0);
    fireEvent.click(screen.getByTestId("sweep-toggle"));
    expect(input("cfg-input-steps").value).toBe("1");
    expect(screen.queryByTestId("sweep-count")).toBeNull();
  });

  it("sends a retry after a network error with the same Idempotency-Key, and a changed sweep with a new one", async () => {
    let posts = 0;
    routes({
      "POST /api/v1/sweeps": () => {
        posts += 1;
        if (posts <= 2) throw new TypeError("Failed to fetch");
        return created(group(11));
      },
    });
    renderSubmit();
    await ready();
    fireEvent.click(screen.getByTestId("sweep-toggle"));
    type("cfg-input-tasks_per_step", "1, 2");
    fireEvent.click(screen.getByTestId("submit"));
    expect((await screen.findByTestId("form-error")).textContent).toContain("Cannot reach the Barrel server");
    expect(screen.getByTestId("sweep-retry-note").textContent).toContain("same Idempotency-Key");

    // Sent again unchanged: the same key, so a first request that did get through is not doubled.
    fireEvent.click(screen.getByTestId("submit"));
    await waitFor(() => expect(posts).toBe(2));
    await screen.findByTestId("sweep-retry-note");
    const [first, second] = requestsTo("POST", "/api/v1/sweeps");
    expect(keyOf(second ?? {})).toBe(keyOf(first ?? {}));

    // Another sweep: another key.
    type("sweep-seeds", "2");
    fireEvent.click(screen.getByTestId("submit"));
    expect((await screen.findByTestId("landed")).textContent).toBe("/groups/11");
    const third = requestsTo("POST", "/api/v1/sweeps")[2];
    expect(keyOf(third ?? {})).toBeDefined();
    expect(keyOf(third ?? {})).not.toBe(keyOf(first ?? {}));
  });
});
