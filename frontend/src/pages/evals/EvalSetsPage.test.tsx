import { cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { errorResponse, stubApi } from "../../test/api";
import { renderPage } from "../../test/render";
import { EvalSetPage } from "./EvalSetPage";
import { EvalSetsPage } from "./EvalSetsPage";
import { NewEvalSetPage } from "./NewEvalSetPage";
import { created, evalSet, evalSetDetail, invalid, page, renderRoutes, sentBodies, team } from "./testing";

const BAD_LINE_3 = "line 3: prompt: required, a non-empty string";
const FILE_TEXT = [
  '{"prompt": "What is 17 + 25?", "reference": "42", "tags": ["sum"]}',
  '{"prompt": "What is 9 + 10?"}',
  '{"promt": "What is 2 + 2?"}',
  '{"prompt": "What is 3 + 4?"}',
].join("\n");

beforeEach(() => {
  document.cookie = "csrftoken=test-token";
});

afterEach(() => {
  cleanup();
  document.cookie = "csrftoken=; expires=Thu, 01 Jan 1970 00:00:00 GMT";
  vi.unstubAllGlobals();
});

function renderNewSet() {
  return renderRoutes(<NewEvalSetPage />, { path: "/eval-sets/new", route: "/eval-sets/new" });
}

async function chooseFile(text: string, name = "prompts.jsonl") {
  const input = await screen.findByTestId("jsonl-file");
  fireEvent.change(input, { target: { files: [new File([text], name, { type: "application/jsonl" })] } });
  await waitFor(() => expect((screen.getByTestId("jsonl-text") as HTMLTextAreaElement).value).toBe(text));
}

describe("the eval sets page", () => {
  it("lists the team's sets with their prompt counts, each linking to its page", async () => {
    stubApi({
      "GET /api/v1/eval-sets": () => page([evalSet(), evalSet({ id: 5, name: "code", prompt_count: 40 })]),
      "GET /api/v1/teams": () => page([team("member")]),
    });
    renderPage(<EvalSetsPage />, { path: "/eval-sets", route: "/eval-sets" });
    const row = await screen.findByTestId("eval-set-row-5");
    expect(within(row).getByRole("link").getAttribute("href")).toBe("/eval-sets/5");
    expect(row.textContent).toContain("40");
    expect((await screen.findByTestId("new-eval-set")).getAttribute("href")).toBe("/eval-sets/new");
  });

  it("tells a viewer why there is no New button", async () => {
    stubApi({
      "GET /api/v1/eval-sets": () => page([evalSet()]),
      "GET /api/v1/teams": () => page([team("viewer")]),
    });
    renderPage(<EvalSetsPage />, { path: "/eval-sets", route: "/eval-sets" });
    expect((await screen.findByTestId("cannot-create")).textContent).toContain("viewer");
    expect(screen.queryByTestId("new-eval-set")).toBeNull();
  });
});

describe("creating an eval set", () => {
  it("shows the server's message for a bad line 3 of a JSONL file beside that line, and keeps the form", async () => {
    const api = stubApi({
      "GET /api/v1/teams": () => page([team("member")]),
      "POST /api/v1/eval-sets": () => invalid({ "jsonl[3].prompt": [BAD_LINE_3], "jsonl[3].promt": ["line 3: promt: unknown field"] }),
    });
    renderNewSet();
    fireEvent.change(await screen.findByTestId("set-name"), { target: { value: "arith" } });
    fireEvent.change(screen.getByTestId("set-guidelines"), { target: { value: "Prefer the correct answer." } });
    fireEvent.click(screen.getByTestId("source-jsonl"));
    await chooseFile(FILE_TEXT);
    expect(screen.getByTestId("jsonl-file-name").textContent).toBe("prompts.jsonl: 4 prompts");
    fireEvent.click(screen.getByTestId("create-set"));

    const line3 = await screen.findByTestId("jsonl-error-3");
    expect(line3.textContent).toContain(BAD_LINE_3);
    expect(line3.textContent).toContain("line 3: promt: unknown field");
    expect(line3.textContent).toContain('{"promt": "What is 2 + 2?"}'); // the line itself, beside its error
    expect(screen.queryByTestId("jsonl-error-1")).toBeNull();
    expect(screen.getByTestId("jsonl-errors").textContent).toContain("nothing was imported");
    // Nothing machine-shaped on top: the summary points at the lines.
    expect(screen.getByTestId("form-error").textContent).not.toContain("jsonl[3]");

    // The form keeps what was typed and loaded.
    expect((screen.getByTestId("set-name") as HTMLInputElement).value).toBe("arith");
    expect((screen.getByTestId("set-guidelines") as HTMLTextAreaElement).value).toBe("Prefer the correct answer.");
    expect((screen.getByTestId("jsonl-text") as HTMLTextAreaElement).value).toBe(FILE_TEXT);
    expect(screen.queryByTestId("landed")).toBeNull();

    const bodies = sentBodies(vi.mocked(fetch).mock.calls, "POST", "/api/v1/eval-sets");
    expect(bodies).toEqual([
      { team: "lab", name: "arith", description: "", guidelines: "Prefer the correct answer.", jsonl: FILE_TEXT },
    ]);
    expect(api.callsTo("/api/v1/eval-sets")).toBe(1);
  });

  it("creates a set from typed prompts and goes to its page; a bad typed prompt's error sits under it", async () => {
    let attempt = 0;
    stubApi({
      "GET /api/v1/teams": () => page([team("viewer", { id: 7, slug: "other", name: "Other" }), team("admin")]),
      "POST /api/v1/eval-sets": () =>
        ++attempt === 1
          ? invalid({ "jsonl[2].prompt": ["line 2: prompt: required, a non-empty string"] })
          : created(evalSetDetail({ id: 9 })),
    });
    renderNewSet();
    // The team the caller may create in is chosen first.
    expect(((await screen.findByTestId("set-team")) as HTMLSelectElement).value).toBe("lab");
    fireEvent.change(screen.getByTestId("set-name"), { target: { value: "arith" } });
    fireEvent.change(screen.getByTestId("prompt-1"), { target: { value: "What is 17 + 25?" } });
    fireEvent.change(screen.getByTestId("reference-1"), { target: { value: "42" } });
    fireEvent.change(screen.getByTestId("tags-1"), { target: { value: "sum, easy" } });
    fireEvent.click(screen.getByTestId("add-prompt"));
    fireEvent.click(screen.getByTestId("add-prompt")); // left empty: not sent
    fireEvent.click(screen.getByTestId("add-prompt"));
    fireEvent.change(screen.getByTestId("reference-4"), { target: { value: "7" } }); // no prompt: refused
    fireEvent.click(screen.getByTestId("create-set"));

    // Line 2 of what was sent is row 4 of the form.
    expect((await screen.findByTestId("prompt-4-error")).textContent).toBe("required, a non-empty string");
    expect(screen.queryByTestId("prompt-2-error")).toBeNull();
    expect((screen.getByTestId("reference-4") as HTMLTextAreaElement).value).toBe("7");

    fireEvent.change(screen.getByTestId("prompt-4"), { target: { value: "What is 3 + 4?" } });
    fireEvent.click(screen.getByTestId("create-set"));
    expect((await screen.findByTestId("landed")).textContent).toBe("/eval-sets/9");
    const bodies = sentBodies(vi.mocked(fetch).mock.calls, "POST", "/api/v1/eval-sets") as { jsonl: string; team: string }[];
    expect(bodies[1]?.team).toBe("lab");
    expect(bodies[1]?.jsonl.split("\n").map((line) => JSON.parse(line) as unknown)).toEqual([
      { prompt: "What is 17 + 25?", reference: "42", tags: ["sum", "easy"] },
      { prompt: "What is 3 + 4?", reference: "7" },
    ]);
  });

  it("shows a taken name under the name field", async () => {
    stubApi({
      "GET /api/v1/teams": () => page([team("member")]),
      "POST /api/v1/eval-sets": () =>
        new Response(
          JSON.stringify({
            error: "conflict",
            message: "Team lab already has an eval set named 'arith'.",
            fields: { name: ["already used in this team"] },
          }),
          { status: 409, headers: { "Content-Type": "application/json" } },
        ),
    });
    renderNewSet();
    fireEvent.change(await screen.findByTestId("set-name"), { target: { value: "arith" } });
    fireEvent.change(screen.getByTestId("prompt-1"), { target: { value: "Hi?" } });
    fireEvent.click(screen.getByTestId("create-set"));
    expect((await screen.findByTestId("set-name-error")).textContent).toBe("already used in this team");
    expect(screen.getByTestId("form-error").textContent).toContain("already has an eval set named 'arith'");
  });

  it("a viewer cannot create: told why, the button disabled", async () => {
    const api = stubApi({ "GET /api/v1/teams": () => page([team("viewer")]) });
    renderNewSet();
    expect((await screen.findByTestId("cannot-create")).textContent).toBe(
      "You are a viewer of Lab: only its members and admins create eval sets.",
    );
    const button = screen.getByTestId("create-set") as HTMLButtonElement;
    expect(button.disabled).toBe(true);
    fireEvent.click(button);
    expect(api.callsTo("/api/v1/eval-sets")).toBe(0);
  });

  it("shows the server's 403 when the caller's role changed since the page loaded", async () => {
    stubApi({
      "GET /api/v1/teams": () => page([team("member")]),
      "POST /api/v1/eval-sets": () => errorResponse(403, "permission_denied", "Viewers cannot create eval sets."),
    });
    renderNewSet();
    fireEvent.change(await screen.findByTestId("set-name"), { target: { value: "arith" } });
    fireEvent.change(screen.getByTestId("prompt-1"), { target: { value: "Hi?" } });
    fireEvent.click(screen.getByTestId("create-set"));
    expect((await screen.findByTestId("form-error")).textContent).toContain("Viewers cannot create eval sets.");
    expect((screen.getByTestId("set-name") as HTMLInputElement).value).toBe("arith");
  });
});

describe("an eval set's page", () => {
  it("shows each prompt with its reference and tags, and the guidelines voters read", async () => {
    stubApi({
      "GET /api/v1/eval-sets/2": () => evalSetDetail(),
      "GET /api/v1/teams/1": () => team("viewer"),
    });
    renderPage(<EvalSetPage />, { path: "/eval-sets/2", route: "/eval-sets/:id" });
    const first = await screen.findByTestId("prompt-1");
    expect(within(first).getAllByRole("cell").map((c) => c.textContent)).toEqual(["1", "What is 17 + 25?", "42", "sumeasy"]);
    expect(screen.getByTestId("guidelines").textContent).toBe("Prefer the correct answer.");
    expect(await screen.findByTestId("cannot-import")).toBeTruthy();
    expect(screen.queryByTestId("new-eval-from-set")).toBeNull();
  });

  it("imports more prompts for a member, and names a bad line without importing", async () => {
    let attempt = 0;
    stubApi({
      "GET /api/v1/eval-sets/2": () => evalSetDetail(),
      "GET /api/v1/teams/1": () => team("member"),
      "POST /api/v1/eval-sets/2/import": () =>
        ++attempt === 1 ? invalid({ "jsonl[1]": ["line 1: not JSON (Expecting value)"] }) : { imported: 1, prompt_count: 3 },
    });
    renderPage(<EvalSetPage />, { path: "/eval-sets/2", route: "/eval-sets/:id" });
    expect((await screen.findByTestId("new-eval-from-set")).getAttribute("href")).toBe("/evals/new?eval_set=2");
    fireEvent.change(await screen.findByTestId("jsonl-text"), { target: { value: "prompt: 2+2" } });
    fireEvent.click(screen.getByTestId("import"));
    expect((await screen.findByTestId("jsonl-error-1")).textContent).toContain("line 1: not JSON (Expecting value)");
    fireEvent.change(screen.getByTestId("jsonl-text"), { target: { value: '{"prompt": "2+2?"}' } });
    fireEvent.click(screen.getByTestId("import"));
    expect((await screen.findByTestId("imported")).textContent).toBe("Imported 1 prompts; the set has 3.");
    expect((screen.getByTestId("jsonl-text") as HTMLTextAreaElement).value).toBe("");
  });
});
