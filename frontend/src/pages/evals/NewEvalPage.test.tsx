import { cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { evalDetail, runPage, runSummary, stubApi } from "../../test/api";
import { NewEvalPage } from "./NewEvalPage";
import { checkpoint, created, evalSet, invalid, page, renderRoutes, sentBodies, team } from "./testing";

const PROJECT = runSummary().project;

beforeEach(() => {
  document.cookie = "csrftoken=test-token";
});

afterEach(() => {
  cleanup();
  document.cookie = "csrftoken=; expires=Thu, 01 Jan 1970 00:00:00 GMT";
  vi.unstubAllGlobals();
});

function routes(role: "viewer" | "member" | "admin", post: () => unknown = () => created(evalDetail({ id: 17 }))) {
  return stubApi({
    "GET /api/v1/eval-sets": () => page([evalSet(), evalSet({ id: 4, name: "code", prompt_count: 0 })]),
    "GET /api/v1/teams": () => page([team(role)]),
    "GET /api/v1/projects": () => page([PROJECT]),
    "GET /api/v1/runs": (url) =>
      runPage(
        [runSummary({ id: 5, name: "grpo-arith" }), runSummary({ id: 6, name: "grpo-long", status: "SUCCEEDED" })].filter(
          (run) => run.name.includes(url.searchParams.get("name") ?? ""),
        ),
      ),
    "GET /api/v1/runs/5/checkpoints": () => [checkpoint(52, 5, 40), checkpoint(51, 5, 20)],
    "GET /api/v1/runs/6/checkpoints": () => [checkpoint(61, 6, 100)],
    "POST /api/v1/evals": post,
  });
}

function renderNewEval(path = "/evals/new") {
  return renderRoutes(<NewEvalPage />, { path, route: "/evals/new" });
}

async function pick(runId: number, checkpointId: number) {
  const open = await screen.findByTestId(`open-run-${runId}`);
  if (open.getAttribute("aria-expanded") !== "true") fireEvent.click(open);
  fireEvent.click(await screen.findByTestId(`pick-checkpoint-${checkpointId}`));
}

describe("creating an eval", () => {
  it("posts the checkpoints chosen from several runs and an outside model, then goes to the eval's page", async () => {
    const api = routes("member");
    renderNewEval("/evals/new?eval_set=2");
    fireEvent.change(await screen.findByTestId("eval-name"), { target: { value: "arith checkpoints" } });
    expect((screen.getByTestId("eval-set") as HTMLSelectElement).value).toBe("2");
    await waitFor(() => expect((screen.getByTestId("eval-project") as HTMLSelectElement).value).toBe(String(PROJECT.id)));

    // Checkpoints are listed by step, whatever order the API gave.
    fireEvent.click(await screen.findByTestId("open-run-5"));
    const listed = await screen.findByTestId("checkpoints-of-5");
    expect(within(listed).getAllByRole("checkbox").map((c) => c.parentElement?.textContent?.trim())).toEqual([
      "step 20",
      "step 40",
    ]);
    await pick(5, 51);
    await pick(5, 52);
    fireEvent.change(screen.getByTestId("run-search"), { target: { value: "long" } });
    await waitFor(() => expect(screen.queryByTestId("pick-run-5")).toBeNull());
    await pick(6, 61);
    fireEvent.click(screen.getByTestId("add-external"));
    fireEvent.change(screen.getByTestId("external-uri-0"), { target: { value: "/shared/models/sft" } });
    fireEvent.change(screen.getByTestId("external-label-0"), { target: { value: "sft-baseline" } });
    fireEvent.change(screen.getByTestId("eval-samples"), { target: { value: "2" } });
    fireEvent.change(screen.getByTestId("eval-min-voters"), { target: { value: "3" } });
    expect(screen.getByTestId("candidate-count").textContent).toBe("4 chosen (2 to 64)");
    expect(screen.getByTestId("chosen").textContent).toContain("grpo-long @ step 100");

    fireEvent.click(screen.getByTestId("create-eval"));
    expect((await screen.findByTestId("landed")).textContent).toBe("/evals/17");
    expect(sentBodies(vi.mocked(fetch).mock.calls, "POST", "/api/v1/evals")).toEqual([
      {
        name: "arith checkpoints",
        project: PROJECT.id,
        eval_set: 2,
        checkpoints: [51, 52, 61],
        external: [{ uri: "/shared/models/sft", label: "sft-baseline" }],
        samples_per_prompt: 2,
        min_voters_per_prompt: 3,
      },
    ]);
    // Runs are searched within the set's team.
    expect(api.calls.some((call) => call.startsWith("GET /api/v1/runs?") && call.includes("team=lab"))).toBe(true);
  });

  it("shows each server error next to its field: a checkpoint by its place, an outside model's label, the set", async () => {
    routes("admin", () =>
      invalid({
        "checkpoints[1]": ["no checkpoint 52 in this team"],
        "external[0].label": ["This field may not be blank."],
        eval_set: ["the eval set has no prompts; import some first"],
      }),
    );
    renderNewEval();
    fireEvent.change(await screen.findByTestId("eval-name"), { target: { value: "e" } });
    await pick(5, 51);
    await pick(5, 52);
    fireEvent.click(screen.getByTestId("add-external"));
    fireEvent.change(screen.getByTestId("external-uri-0"), { target: { value: "/m" } });
    fireEvent.click(screen.getByTestId("create-eval"));

    const second = await screen.findByTestId("chosen-52");
    await waitFor(() => expect(second.textContent).toContain("no checkpoint 52 in this team"));
    expect(screen.getByTestId("chosen-51").textContent).not.toContain("no checkpoint");
    expect(screen.getByTestId("external-0").textContent).toContain("This field may not be blank.");
    expect(screen.getByTestId("eval-set-error").textContent).toBe("the eval set has no prompts; import some first");
    expect(screen.getByTestId("form-error").textContent).not.toContain("checkpoints[1]");
    expect(screen.queryByTestId("landed")).toBeNull();
    expect((screen.getByTestId("eval-name") as HTMLInputElement).value).toBe("e");
  });

  it("holds samples and voters per prompt within the schema's bounds before anything is sent", async () => {
    const api = routes("member");
    renderNewEval();
    fireEvent.change(await screen.findByTestId("eval-name"), { target: { value: "e" } });
    const samples = screen.getByTestId("eval-samples") as HTMLInputElement;
    const voters = screen.getByTestId("eval-min-voters") as HTMLInputElement;
    expect([samples.min, samples.max, voters.min, voters.max]).toEqual(["1", "8", "1", "100"]);
    fireEvent.change(samples, { target: { value: "9" } });
    expect(samples.checkValidity()).toBe(false);
    fireEvent.click(screen.getByTestId("create-eval"));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(api.callsTo("/api/v1/evals")).toBe(0);
  });

  it("a viewer cannot create: told why, and nothing is posted", async () => {
    const api = routes("viewer");
    renderNewEval();
    expect((await screen.findByTestId("cannot-create")).textContent).toBe(
      "You are a viewer of Lab: only its members and admins create evals.",
    );
    const button = screen.getByTestId("create-eval") as HTMLButtonElement;
    expect(button.disabled).toBe(true);
    fireEvent.click(button);
    expect(api.callsTo("/api/v1/evals")).toBe(0);
  });

  it("a viewer finds no New eval entry on the evals page, and is told why", async () => {
    const { EvalsPage } = await import("./EvalsPage");
    stubApi({
      "GET /api/v1/evals": () => page([evalDetail()]),
      "GET /api/v1/teams": () => page([team("viewer")]),
    });
    renderRoutes(<EvalsPage />, { path: "/evals", route: "/evals" });
    expect((await screen.findByTestId("cannot-create")).textContent).toContain("viewer");
    expect(screen.queryByTestId("new-eval")).toBeNull();
    expect(screen.getByTestId("eval-sets-link").getAttribute("href")).toBe("/eval-sets");
  });

  it("offers members New eval and Eval sets on the evals page", async () => {
    const { EvalsPage } = await import("./EvalsPage");
    stubApi({
      "GET /api/v1/evals": () => page([evalDetail()]),
      "GET /api/v1/teams": () => page([team("member")]),
    });
    renderRoutes(<EvalsPage />, { path: "/evals", route: "/evals" });
    await screen.findByTestId("eval-row-3");
    expect(screen.getByTestId("new-eval").getAttribute("href")).toBe("/evals/new");
    expect(screen.queryByTestId("cannot-create")).toBeNull();
  });
});
