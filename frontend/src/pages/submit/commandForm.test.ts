/** The schema form's widgets for the command recipe's fields: a command line, env rows, pip lines, a working dir. */
import { describe, expect, it } from "vitest";

import { COMMAND_SCHEMA, GRPO_SCHEMA, SMOKE_SCHEMA } from "./fixtures";
import { rowsFromText } from "./KeyValueEditor";
import {
  buildConfig,
  describeBounds,
  diffConfigs,
  draftsFrom,
  fieldStatus,
  flattenSchema,
  isSweepable,
  mapDraft,
  mapRows,
  placeServerErrors,
  readField,
  splitLines,
  type FormSpec,
} from "./schemaForm";

const command = flattenSchema(COMMAND_SCHEMA);

function field(spec: FormSpec, path: string) {
  const found = spec.byPath.get(path);
  if (!found) throw new Error(`no field ${path}`);
  return found;
}

const REF = `sha256:${"ab".repeat(32)}`;

describe("the command recipe's form", () => {
  it("gives each field the widget its schema asks for", () => {
    expect(command.fields.map((f) => [f.path, f.kind, f.ui ?? null])).toEqual(
      expect.arrayContaining([
        ["command", "command", "command"],
        ["env", "map", null],
        ["pip", "lines", "lines"],
        ["working_dir", "string", "working-dir"],
        ["cpus", "number", null],
        ["gpus", "number", null],
        ["reserve_in_entrypoint", "boolean", null],
      ]),
    );
    // A plain string field the recipe adds later is a plain input.
    const added = flattenSchema({
      ...COMMAND_SCHEMA,
      properties: { ...COMMAND_SCHEMA.properties, logs: { anyOf: [{ type: "string" }, { type: "null" }], default: null } },
    });
    expect(field(added, "logs").kind).toBe("string");
    expect(["command", "env", "pip"].map((p) => isSweepable(field(command, p)))).toEqual([false, false, false]);
    expect(describeBounds(field(command, "pip"))).toBe("one per line, at most 100");
    expect(describeBounds(field(command, "env"))).toBe("a name and a value per row");
  });

  it("leaves the other recipes' fields as they were: lists comma-separated, number maps as JSON", () => {
    const grpo = flattenSchema(GRPO_SCHEMA);
    expect(field(grpo, "task.ops").kind).toBe("array");
    expect(field(grpo, "reward.weights").kind).toBe("json");
    expect(flattenSchema(SMOKE_SCHEMA).fields.every((f) => f.kind !== "command" && f.kind !== "map" && f.kind !== "lines")).toBe(true);
  });

  it("sends the command line as typed, for the server to split", () => {
    const drafts = {
      command: "  python train.py --lr '1e-6 x' ",
      env: mapDraft([
        ["HF_HOME", "/tmp/hf"],
        ["", ""],
        [" LR ", "1e-6"],
      ]),
      pip: "trl==0.19.1\n\n  datasets \n",
      working_dir: REF,
      gpus: "1",
    };
    const built = buildConfig(command, drafts, {});
    expect(built.errors).toEqual({});
    expect(built.config).toEqual({
      command: "python train.py --lr '1e-6 x'",
      env: { HF_HOME: "/tmp/hf", LR: "1e-6" },
      pip: ["trl==0.19.1", "datasets"],
      working_dir: REF,
      gpus: 1,
    });
  });

  it("requires a command and checks what only the form can: an env row without a name, a name twice", () => {
    expect(buildConfig(command, { command: "   " }, {}).errors).toEqual({ command: "required" });
    expect(readField(field(command, "env"), mapDraft([["", "x"]]))).toEqual({
      state: "invalid",
      error: "row 1 has a value but no name",
    });
    expect(readField(field(command, "env"), mapDraft([["A", "1"], ["A", "2"]]))).toEqual({
      state: "invalid",
      error: "A is given twice",
    });
    // Blank rows and blank lines are nothing: the recipe's default.
    expect(readField(field(command, "env"), mapDraft([["", ""]]))).toEqual({ state: "default" });
    expect(readField(field(command, "pip"), "\n  \n")).toEqual({ state: "default" });
    expect(readField(field(command, "pip"), Array.from({ length: 101 }, (_, i) => `p${i}`).join("\n"))).toEqual({
      state: "invalid",
      error: "give at most 100 values",
    });
    expect(readField(field(command, "working_dir"), "sha256:nothex")).toMatchObject({ state: "invalid" });
  });

  it("shows a run's config in the widgets, and a clone that changes nothing sends it as it was", () => {
    const source = {
      seed: 7,
      command: ["python", "train.py", "--name", "a b"],
      env: { LR: "1e-6", EMPTY: "" },
      pip: ["trl==0.19.1", "datasets"],
      working_dir: REF,
      cpus: 1,
      gpus: 0,
      reserve_in_entrypoint: true,
    };
    const drafts = draftsFrom(command, source);
    expect(drafts.command).toBe("python train.py --name 'a b'");
    expect(mapRows(drafts.env)).toEqual([
      ["LR", "1e-6"],
      ["EMPTY", ""],
    ]);
    expect(drafts.pip).toBe("trl==0.19.1\ndatasets");
    expect(splitLines(drafts.pip ?? "")).toEqual(source.pip);
    const same = buildConfig(command, drafts, source);
    expect(diffConfigs(source, same.config)).toEqual([]);
    expect(fieldStatus(field(command, "command"), drafts.command)).toBe("set");

    // A run with no env and no pip: a clone keeps them empty, as they were.
    const bare = { ...source, env: {}, pip: [] };
    expect(diffConfigs(bare, buildConfig(command, draftsFrom(command, bare), bare).config)).toEqual([]);
    // Edited: the line goes as typed; the diff names what changed.
    const edited = buildConfig(
      command,
      { ...drafts, command: "python train.py --name 'a b' --lr 2", env: mapDraft([["LR", "2e-6"]]) },
      source,
    );
    expect(diffConfigs(source, edited.config)).toEqual([
      { path: "command", before: source.command, after: "python train.py --name 'a b' --lr 2" },
      { path: "env.LR", before: "1e-6", after: "2e-6" },
      { path: "env.EMPTY", before: "", after: undefined },
    ]);
  });

  it("puts the server's refusals of a command line and an env name beside their fields", () => {
    const placed = placeServerErrors(
      command,
      {
        "config.command": ["Value error, cannot split the command line into words: No closing quotation"],
        "config.env": ["Value error, '1X' is not a variable name"],
        "config.pip[1]": ["Input should be a valid string"],
      },
      [],
    );
    expect(Object.keys(placed.fields)).toEqual(["command", "env", "pip"]);
    expect(placed.fields.pip).toEqual(["value 2: Input should be a valid string"]);
  });
});

describe("rows pasted into an env name", () => {
  it("reads NAME=value lines as a .env file has them", () => {
    expect(rowsFromText("export A=1\n# a comment\nB='two words'\n\nC=x=y")).toEqual([
      ["A", "1"],
      ["B", "two words"],
      ["C", "x=y"],
    ]);
    expect(rowsFromText("HF_TOKEN")).toBeNull();
  });
});
