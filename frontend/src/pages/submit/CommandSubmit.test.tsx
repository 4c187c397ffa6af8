/** The submit page with the command recipe: a command line, env rows, pip lines, a zip uploaded with its progress. */
import { act, cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { jsonResponse, runDetail, runSummary, stubApi } from "../../test/api";
import { created, invalid, page, renderRoutes, sentBodies } from "../evals/testing";
import type { Recipe } from "./api";
import { COMMAND_SCHEMA, SMOKE_SCHEMA } from "./fixtures";
import { SubmitPage } from "./SubmitPage";

const PROJECT = runSummary().project; // lab/arith, team 1
const RECIPES: Recipe[] = [
  { name: "smoke", description: "A few Ray tasks per step.", config_schema: { ...SMOKE_SCHEMA } },
  { name: "command", description: "Any trainer's entrypoint.", config_schema: { ...COMMAND_SCHEMA } },
];
const REF = `sha256:${"cd".repeat(32)}`;

/** XMLHttpRequest as the upload uses it, driven by the test: what was sent, then progress and an answer. */
class FakeXhr {
  static last: FakeXhr | null = null;
  method = "";
  url = "";
  headers: Record<string, string> = {};
  body: unknown = null;
  status = 0;
  statusText = "";
  responseText = "";
  withCredentials = false;
  upload: { onprogress: ((event: { loaded: number; total: number; lengthComputable: boolean }) => void) | null } = {
    onprogress: null,
  };
  onload: (() => void) | null = null;
  onerror: (() => void) | null = null;
  onabort: (() => void) | null = null;
  aborted = false;
  constructor() {
    FakeXhr.last = this;
  }
  open(method: string, url: string) {
    this.method = method;
    this.url = url;
  }
  setRequestHeader(name: string, value: string) {
    this.headers[name] = value;
  }
  send(body: unknown) {
    this.body = body;
  }
  abort() {
    this.aborted = true;
    this.onabort?.();
  }
  progress(loaded: number, total: number) {
    act(() => this.upload.onprogress?.({ loaded, total, lengthComputable: true }));
  }
  answer(status: number, body: unknown) {
    this.status = status;
    this.responseText = JSON.stringify(body);
    act(() => this.onload?.());
  }
}

beforeEach(() => {
  document.cookie = "csrftoken=test-token";
  FakeXhr.last = null;
  vi.stubGlobal("XMLHttpRequest", FakeXhr);
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
    "GET /api/v1/teams": () => page([{ ...PROJECT.team, role: "member", viewers_may_vote: false, created_at: "" }]),
    "POST /api/v1/runs": () => created(runDetail({ id: 42, recipe: "command" })),
    ...extra,
  });
}

function type(testId: string, value: string) {
  fireEvent.change(screen.getByTestId(testId), { target: { value } });
}

function value(testId: string): string {
  return (screen.getByTestId(testId) as HTMLInputElement).value;
}

async function commandForm(path = "/runs/new?recipe=command") {
  renderRoutes(<SubmitPage />, { path, route: "/runs/new" });
  await screen.findByTestId("submit-form");
  await screen.findByTestId("cfg-input-command");
}

function pickZip(name = "trainer.zip", bytes = 2048) {
  const file = new File([new Uint8Array(bytes)], name, { type: "application/zip" });
  fireEvent.change(screen.getByTestId("cfg-upload-working_dir"), { target: { files: [file] } });
  return file;
}

describe("a command run from the browser", () => {
  it("takes a command line, env rows, pip lines and an uploaded zip, and sends them as barrel submit would", async () => {
    routes();
    await commandForm();
    await waitFor(() => expect(value("submit-project")).toBe("lab/arith"));
    // Each field has its own widget.
    expect(screen.getByTestId("cfg-input-command").tagName).toBe("INPUT");
    expect(screen.getByTestId("cfg-input-pip").tagName).toBe("TEXTAREA");
    expect(screen.getByTestId("secrets-note").textContent).toContain("Lab's secrets");

    type("cfg-input-command", "python train.py --name 'run one'");
    expect(screen.getByTestId("cfg-words-command").textContent).toBe("4 words: pythontrain.py--namerun one");
    type("cfg-input-env-name-0", "LR");
    type("cfg-input-env-value-0", "1e-6");
    fireEvent.click(screen.getByTestId("cfg-input-env-add"));
    type("cfg-input-env-name-1", "HF_TOKEN");
    type("cfg-input-env-value-1", "hf_abc");
    // A credential in the config is warned of, with the way to the team's secrets.
    const warning = screen.getByTestId("cfg-credential-env");
    expect(warning.textContent).toContain("HF_TOKEN looks like a credential");
    expect(within(warning).getByRole("link").getAttribute("href")).toBe("/teams/1/settings");
    type("cfg-input-env-name-1", "HF_HOME");
    type("cfg-input-env-value-1", "/tmp/hf");
    expect(screen.queryByTestId("cfg-credential-env")).toBeNull();
    fireEvent.click(screen.getByTestId("cfg-input-env-add"));
    expect(screen.getAllByTestId("cfg-input-env-row")).toHaveLength(3);
    fireEvent.click(screen.getByTestId("cfg-input-env-remove-2"));
    expect(screen.getAllByTestId("cfg-input-env-row")).toHaveLength(2);
    type("cfg-input-pip", "trl==0.19.1\n\ndatasets\n");
    type("cfg-input-gpus", "1");

    const file = pickZip();
    await waitFor(() => expect(FakeXhr.last?.body).toBe(file));
    const xhr = FakeXhr.last as FakeXhr;
    expect([xhr.method, xhr.url, xhr.headers["X-CSRFToken"]]).toEqual(["POST", "/api/v1/teams/1/working-dirs", "test-token"]);
    xhr.progress(1024, 2048);
    const progress = screen.getByTestId("cfg-upload-progress-working_dir");
    expect(progress.textContent).toContain("trainer.zip: 1.0 KB of 2.0 KB (50%)");
    expect((progress.querySelector("progress") as HTMLProgressElement).value).toBe(1024);
    // The run waits for its directory.
    const submit = screen.getByTestId("submit") as HTMLButtonElement;
    expect([submit.disabled, submit.textContent]).toEqual([true, "Uploading the working directory…"]);
    xhr.answer(201, { ref: REF, size: 2048, files: 3, created: true });
    await waitFor(() => expect(value("cfg-input-working_dir")).toBe(REF));
    expect((await screen.findByTestId("cfg-upload-done-working_dir")).textContent).toBe(
      "✓ trainer.zip uploaded to Lab: 3 files, 2.0 KB.",
    );

    await waitFor(() => expect(submit.disabled).toBe(false));
    fireEvent.click(submit);
    expect((await screen.findByTestId("landed")).textContent).toBe("/runs/42");
    expect(sentBodies(vi.mocked(fetch).mock.calls, "POST", "/api/v1/runs")).toEqual([
      {
        project: "lab/arith",
        name: "",
        recipe: "command",
        config: {
          command: "python train.py --name 'run one'",
          env: { LR: "1e-6", HF_HOME: "/tmp/hf" },
          pip: ["trl==0.19.1", "datasets"],
          working_dir: REF,
          gpus: 1,
        },
        tags: [],
      },
    ]);
  });

  it("says clearly when the zip is too large, and keeps the field as it was", async () => {
    routes();
    await commandForm();
    await waitFor(() => expect(value("submit-project")).toBe("lab/arith"));
    pickZip("huge.zip");
    await waitFor(() => expect(FakeXhr.last?.body).toBeTruthy());
    FakeXhr.last?.answer(413, {
      error: "too_large",
      message: "The working directory's zip is larger than this server's limit of 104857600 bytes.",
    });
    const error = await screen.findByTestId("cfg-upload-error-working_dir");
    expect(error.textContent).toBe(
      "huge.zip was not uploaded. Too large: The working directory's zip is larger than this server's limit of 104857600 bytes.",
    );
    expect(error.getAttribute("role")).toBe("alert");
    expect(value("cfg-input-working_dir")).toBe("");
    await waitFor(() => expect((screen.getByTestId("submit") as HTMLButtonElement).disabled).toBe(false));
  });

  it("uploads a zip dropped on the field", async () => {
    routes();
    await commandForm();
    await waitFor(() => expect(value("submit-project")).toBe("lab/arith"));
    const file = new File([new Uint8Array(10)], "dropped.zip", { type: "application/zip" });
    const field = screen.getByTestId("cfg-workdir-working_dir");
    fireEvent.dragOver(field, { dataTransfer: { types: ["Files"], files: [file] } });
    expect(field.className).toContain("wd-over");
    fireEvent.drop(field, { dataTransfer: { types: ["Files"], files: [file] } });
    await waitFor(() => expect(FakeXhr.last?.body).toBe(file));
    FakeXhr.last?.answer(200, { ref: REF, size: 10, files: 1, created: false });
    expect((await screen.findByTestId("cfg-upload-done-working_dir")).textContent).toBe(
      "✓ dropped.zip uploaded to Lab: 1 file, 10 B (the team had it already).",
    );
    expect(value("cfg-input-working_dir")).toBe(REF);
  });

  it("shows the server's refusal of the command line and of an env name beside each field", async () => {
    routes({
      "POST /api/v1/runs": () =>
        invalid({
          "config.command": ["Value error, cannot split the command line into words: No closing quotation"],
          "config.env": ["Value error, '1X' is not a variable name"],
        }),
    });
    await commandForm();
    await waitFor(() => expect(value("submit-project")).toBe("lab/arith"));
    type("cfg-input-command", "python 'train.py");
    // The form's own split says so as typed, but sends it: the server's split decides.
    expect(screen.getByTestId("cfg-words-command").textContent).toBe("Cannot be split into words: no closing quotation.");
    type("cfg-input-env-name-0", "1X");
    type("cfg-input-env-value-0", "y");
    fireEvent.click(screen.getByTestId("submit"));
    expect((await screen.findByTestId("cfg-server-error-command")).textContent).toBe(
      "Value error, cannot split the command line into words: No closing quotation",
    );
    expect(within(screen.getByTestId("cfg-field-env")).getByTestId("cfg-server-error-env").textContent).toBe(
      "Value error, '1X' is not a variable name",
    );
    type("cfg-input-env-name-0", "X1");
    expect(screen.queryByTestId("cfg-server-error-env")).toBeNull();
  });

  it("clones a command run with edits: the widgets show its config and the diff lists what changed", async () => {
    const config = {
      seed: 3,
      command: ["python", "train.py", "--name", "a b"],
      env: { LR: "1e-6" },
      pip: ["trl==0.19.1"],
      working_dir: REF,
      cpus: 1,
      gpus: 0,
      reserve_in_entrypoint: true,
    };
    routes({
      "GET /api/v1/runs/9": () => runDetail({ id: 9, recipe: "command", config }),
      "POST /api/v1/runs/9/clone": () => jsonResponse(runDetail({ id: 43, recipe: "command" }), 201),
    });
    await commandForm("/runs/new?from=9");
    expect(value("cfg-input-command")).toBe("python train.py --name 'a b'");
    expect([value("cfg-input-env-name-0"), value("cfg-input-env-value-0")]).toEqual(["LR", "1e-6"]);
    expect(value("cfg-input-pip")).toBe("trl==0.19.1");
    expect(value("cfg-input-working_dir")).toBe(REF);
    expect(screen.getByTestId("clone-diff-empty")).toBeTruthy();

    type("cfg-input-env-value-0", "2e-6");
    type("cfg-input-pip", "trl==0.19.1\ndatasets");
    expect(screen.getByTestId("diff-env.LR").textContent).toBe('env.LR: "1e-6" → "2e-6"');
    expect(screen.getByTestId("diff-pip").textContent).toBe('pip: ["trl==0.19.1"] → ["trl==0.19.1","datasets"]');
    expect(screen.queryByTestId("diff-command")).toBeNull();
    fireEvent.click(screen.getByTestId("submit"));
    expect((await screen.findByTestId("landed")).textContent).toBe("/runs/43");
    expect(sentBodies(vi.mocked(fetch).mock.calls, "POST", "/api/v1/runs/9/clone")).toEqual([
      { name: "", config: { ...config, env: { LR: "2e-6" }, pip: ["trl==0.19.1", "datasets"] }, tags: ["demo"] },
    ]);
  });
});
