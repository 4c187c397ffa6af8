import { describe, expect, it } from "vitest";

import { GRPO_SCHEMA, SMOKE_SCHEMA } from "./fixtures";
import {
  buildConfig,
  collapseSweep,
  describeBounds,
  describeDefault,
  describeRunCount,
  diffConfigs,
  draftsFrom,
  fieldStatus,
  flattenSchema,
  jsonDocument,
  parseProject,
  parseScalar,
  parseSeeds,
  parseTags,
  placeServerErrors,
  readField,
  readJsonDocument,
  resolveRef,
  sweepSize,
  unwrapNullable,
  type Field,
  type FormSpec,
  type JsonSchema,
  type ScalarSpec,
} from "./schemaForm";

const smoke = flattenSchema(SMOKE_SCHEMA);
const grpo = flattenSchema(GRPO_SCHEMA);

function field(spec: FormSpec, path: string): Field {
  const found = spec.byPath.get(path);
  if (!found) throw new Error(`no field ${path}`);
  return found;
}

/** A scalar field as parseScalar takes it. */
function scalar(spec: FormSpec, path: string): ScalarSpec {
  const found = field(spec, path);
  const kind = found.kind;
  if (kind === "array" || kind === "lines" || kind === "command" || kind === "map" || kind === "json") {
    throw new Error(`${path} is not a scalar`);
  }
  return { ...found, kind };
}

describe("flattenSchema", () => {
  it("lists smoke's fields in schema order, with types, bounds, defaults and help", () => {
    expect(smoke.sections.map((s) => s.path)).toEqual([""]);
    expect(smoke.fields.map((f) => f.path)).toEqual([
      "seed",
      "steps",
      "interval_s",
      "tasks_per_step",
      "task_cpus",
      "fail_at_step",
    ]);
    expect(field(smoke, "steps")).toMatchObject({
      kind: "integer",
      minimum: 1,
      maximum: 1000000,
      default: 20,
      hasDefault: true,
      nullable: false,
      description: "Number of steps to run.",
    });
    expect(field(smoke, "interval_s")).toMatchObject({ kind: "number", minimum: 0, maximum: 3600, default: 0.2 });
    // anyOf [integer, null]: a nullable integer whose bounds come from the integer branch.
    expect(field(smoke, "seed")).toMatchObject({ kind: "integer", nullable: true, default: null, minimum: 0 });
  });

  it("follows grpo's $refs into sections, a section inside a section included", () => {
    expect(grpo.sections.map((s) => s.path)).toEqual(["", "model", "model.tiny", "task", "reward", "algorithm"]);
    expect(grpo.sections[0]?.fields.map((f) => f.path)).toEqual(["seed", "steps", "trainer_device", "fail_at_step"]);
    expect(field(grpo, "model.tiny.heads")).toMatchObject({
      kind: "integer",
      section: "model.tiny",
      default: 4,
      description: "Attention heads (must divide hidden_size).",
    });
    expect(field(grpo, "algorithm.lr")).toMatchObject({ kind: "number", exclusiveMinimum: 0, maximum: 1, default: 0.0005 });
  });

  it("reads enums, a const, optional numbers, lists of choices and maps", () => {
    expect(field(grpo, "algorithm.mode")).toMatchObject({ kind: "enum", options: ["sync", "async"], default: "sync" });
    expect(field(grpo, "task.name")).toMatchObject({ kind: "enum", options: ["arithmetic"], readOnly: true });
    expect(field(grpo, "algorithm.tis_cap")).toMatchObject({ kind: "number", nullable: true, default: 2, exclusiveMinimum: 0 });
    expect(field(grpo, "model.path")).toMatchObject({ kind: "string", nullable: true, default: null });
    const ops = field(grpo, "task.ops");
    expect(ops).toMatchObject({ kind: "array", minItems: 1, hasDefault: false });
    expect(ops.item).toMatchObject({ kind: "enum", options: ["+", "-", "*"] });
    expect(field(grpo, "reward.weights")).toMatchObject({ kind: "json", hasDefault: false });
    expect(field(grpo, "algorithm.reference")).toMatchObject({ kind: "boolean", default: true });
  });

  it("takes a nested field's default from its parent's default object, and marks required fields", () => {
    const schema: JsonSchema = {
      type: "object",
      required: ["uri"],
      properties: {
        uri: { type: "string", minLength: 1 },
        opt: { $ref: "#/$defs/Opt", default: { beta: 0.9 } },
      },
      $defs: { Opt: { type: "object", properties: { beta: { type: "number" }, eps: { type: "number", default: 1e-8 } } } },
    };
    const spec = flattenSchema(schema);
    expect(field(spec, "uri")).toMatchObject({ required: true, hasDefault: false });
    expect(field(spec, "opt.beta")).toMatchObject({ hasDefault: true, default: 0.9 });
    expect(field(spec, "opt.eps").default).toBe(1e-8);
  });

  it("types what it cannot show as inputs as JSON: unions, lists of objects, a self-reference", () => {
    const schema: JsonSchema = {
      type: "object",
      properties: {
        either: { anyOf: [{ type: "integer" }, { type: "string" }], default: 1 },
        list: { type: "array", items: { $ref: "#/$defs/Item" } },
        node: { $ref: "#/$defs/Node" },
      },
      $defs: {
        Item: { type: "object", properties: { key: { type: "string" } }, required: ["key"] },
        Node: { type: "object", properties: { child: { anyOf: [{ $ref: "#/$defs/Node" }, { type: "null" }] } } },
      },
    };
    const spec = flattenSchema(schema);
    expect(field(spec, "either").kind).toBe("json");
    expect(field(spec, "list").kind).toBe("json");
    expect(field(spec, "node.child")).toMatchObject({ kind: "json", nullable: true });
  });
});

describe("resolveRef and unwrapNullable", () => {
  it("lets the keys beside a $ref win over the target's", () => {
    const root: JsonSchema = { $defs: { A: { type: "integer", description: "inner", default: 1 } } };
    expect(resolveRef({ $ref: "#/$defs/A", description: "outer" }, root)).toEqual({
      type: "integer",
      description: "outer",
      default: 1,
    });
    expect(resolveRef({ allOf: [{ $ref: "#/$defs/A" }], default: 3 }, root)).toMatchObject({ type: "integer", default: 3 });
    // A reference to nothing leaves what is beside it.
    expect(resolveRef({ $ref: "#/$defs/Missing", title: "x" }, root)).toEqual({ title: "x" });
  });

  it("reads ['number', 'null'] as a nullable number", () => {
    expect(unwrapNullable({ type: ["number", "null"], default: null }, {})).toEqual({
      schema: { type: "number", default: null },
      nullable: true,
      union: false,
    });
  });
});

describe("parseScalar", () => {
  const integer = scalar(smoke, "steps");
  const lr = scalar(grpo, "algorithm.lr");

  it("reads numbers as typed, exponents included, and refuses what is not one", () => {
    expect(parseScalar(lr, "3e-6")).toEqual({ ok: true, value: 3e-6 });
    expect(parseScalar(lr, " .5 ")).toEqual({ ok: true, value: 0.5 });
    expect(parseScalar(lr, "0x10")).toEqual({ ok: false, error: '"0x10" is not a number' });
    expect(parseScalar(lr, "Infinity").ok).toBe(false);
    expect(parseScalar(lr, "1e-6, 3e-6")).toEqual({
      ok: false,
      error: '"1e-6, 3e-6" is not a number (turn Sweep on to give several)',
    });
  });

  it("holds integers whole and every value within its bounds", () => {
    expect(parseScalar(integer, "2.5")).toEqual({ ok: false, error: "must be a whole number, not 2.5" });
    expect(parseScalar(integer, "1e3")).toEqual({ ok: true, value: 1000 });
    expect(parseScalar(integer, "0")).toEqual({ ok: false, error: "must be at least 1" });
    expect(parseScalar(integer, "1000001")).toEqual({ ok: false, error: "must be at most 1000000" });
    expect(parseScalar(lr, "0")).toEqual({ ok: false, error: "must be more than 0" });
    expect(parseScalar(lr, "1")).toEqual({ ok: true, value: 1 });
    expect(parseScalar({ kind: "number", options: [], exclusiveMaximum: 1 }, "1")).toEqual({
      ok: false,
      error: "must be less than 1",
    });
  });

  it("reads booleans, enum choices and strings with their limits", () => {
    expect(parseScalar(scalar(grpo, "algorithm.reference"), "False")).toEqual({ ok: true, value: false });
    expect(parseScalar(scalar(grpo, "algorithm.mode"), "async")).toEqual({ ok: true, value: "async" });
    expect(parseScalar(scalar(grpo, "algorithm.mode"), "fast")).toEqual({ ok: false, error: "must be one of sync, async" });
    expect(parseScalar({ kind: "enum", options: [1, 2] }, "2")).toEqual({ ok: true, value: 2 });
    const name: ScalarSpec = { kind: "string", options: [], minLength: 2, maxLength: 4, pattern: "^[a-z]+$" };
    expect(parseScalar(name, "a")).toEqual({ ok: false, error: "must be at least 2 characters" });
    expect(parseScalar(name, "abcde")).toEqual({ ok: false, error: "must be at most 4 characters" });
    expect(parseScalar(name, "AB")).toEqual({ ok: false, error: "must match ^[a-z]+$" });
    expect(parseScalar(name, "ab")).toEqual({ ok: true, value: "ab" });
  });
});

describe("readField", () => {
  it("reads an empty input as the default and null as unset", () => {
    expect(readField(field(smoke, "steps"), "")).toEqual({ state: "default" });
    expect(readField(field(smoke, "steps"), "  ")).toEqual({ state: "default" });
    expect(readField(field(grpo, "algorithm.tis_cap"), null)).toEqual({ state: "value", value: null });
    expect(readField(field(smoke, "steps"), null)).toEqual({ state: "invalid", error: "cannot be unset" });
  });

  it("reads a list of choices comma-separated, each checked", () => {
    const ops = field(grpo, "task.ops");
    expect(readField(ops, "+, *")).toEqual({ state: "value", value: ["+", "*"] });
    expect(readField(ops, "+, /")).toEqual({ state: "invalid", error: 'value 2 ("/") must be one of +, -, *' });
    expect(readField(ops, "+,,-")).toEqual({ state: "invalid", error: "value 2 is empty: remove the extra comma" });
    const unique = { ...ops, uniqueItems: true, maxItems: 2 };
    expect(readField(unique, "+, +")).toEqual({ state: "invalid", error: "a value is given twice" });
    expect(readField(unique, "+, -, *")).toEqual({ state: "invalid", error: "give at most 2 values" });
  });

  it("reads a JSON field and checks it against its schema", () => {
    const weights = field(grpo, "reward.weights");
    expect(readField(weights, '{"correct": 1, "format": 0.5}')).toEqual({
      state: "value",
      value: { correct: 1, format: 0.5 },
    });
    expect(readField(weights, '{"correct": "high"}')).toEqual({ state: "invalid", error: "correct: must be number" });
    expect(readField(weights, "[1]")).toEqual({ state: "invalid", error: "must be object" });
    const broken = readField(weights, "{correct: 1");
    expect(broken.state === "invalid" && broken.error.startsWith("not valid JSON")).toBe(true);
  });

  it("checks a JSON field's items through their $ref", () => {
    const schema: JsonSchema = {
      type: "object",
      properties: { list: { type: "array", minItems: 1, items: { $ref: "#/$defs/Item" } } },
      $defs: { Item: { type: "object", properties: { key: { type: "string", minLength: 1 } }, required: ["key"] } },
    };
    const list = field(flattenSchema(schema), "list");
    expect(readField(list, "[]")).toEqual({ state: "invalid", error: "needs at least 1 items" });
    expect(readField(list, '[{"key": "a"}, {}]')).toEqual({ state: "invalid", error: "[1]: key is required" });
    expect(readField(list, '[{"key": "a"}]')).toEqual({ state: "value", value: [{ key: "a" }] });
  });

  it("in a sweep, reads several values of a scalar field, each checked, none twice", () => {
    const lr = field(grpo, "algorithm.lr");
    expect(readField(lr, "1e-6, 3e-6", true)).toEqual({ state: "sweep", values: [1e-6, 3e-6] });
    expect(readField(lr, "1e-6", true)).toEqual({ state: "value", value: 1e-6 });
    expect(readField(lr, "1e-6, 0", true)).toEqual({ state: "invalid", error: 'value 2 ("0") must be more than 0' });
    expect(readField(lr, "1e-6, 0.000001", true)).toEqual({ state: "invalid", error: "0.000001 is given twice" });
    expect(readField(field(grpo, "algorithm.mode"), "sync,async", true)).toEqual({
      state: "sweep",
      values: ["sync", "async"],
    });
    // Without a sweep, a list in a number field is a mistake to point at.
    expect(readField(lr, "1e-6, 3e-6").state).toBe("invalid");
    // The seed is the sweep's seeds, and a list field stays a list.
    expect(readField(field(smoke, "seed"), "1, 2", true).state).toBe("invalid");
    expect(readField(field(grpo, "task.ops"), "+, -", true)).toEqual({ state: "value", value: ["+", "-"] });
  });
});

describe("fieldStatus", () => {
  it("marks only values that differ from the default as changed", () => {
    const steps = field(smoke, "steps");
    expect(fieldStatus(steps, "")).toBe("default");
    expect(fieldStatus(steps, "20")).toBe("default");
    expect(fieldStatus(steps, "21")).toBe("changed");
    expect(fieldStatus(steps, "0")).toBe("invalid");
    expect(fieldStatus(steps, "20, 40", true)).toBe("swept");
    expect(fieldStatus(field(grpo, "task.ops"), "+")).toBe("set");
    expect(fieldStatus(field(grpo, "algorithm.tis_cap"), null)).toBe("changed");
    expect(fieldStatus(field(smoke, "seed"), "")).toBe("default");
    expect(fieldStatus(field(smoke, "seed"), "7", true)).toBe("swept");
  });
});

describe("describeDefault and describeBounds", () => {
  it("say each field's default and limits as the form's help shows them", () => {
    expect(describeDefault(field(smoke, "steps"))).toBe("default 20");
    expect(describeDefault(field(smoke, "seed"))).toBe("default unset");
    expect(describeDefault(field(grpo, "task.ops"))).toBe("default set by the recipe");
    expect(describeDefault(field(grpo, "task.name"))).toBeNull();
    expect(describeBounds(field(smoke, "steps"))).toBe("whole number, ≥ 1, ≤ 1000000");
    expect(describeBounds(field(grpo, "algorithm.lr"))).toBe("> 0, ≤ 1");
    expect(describeBounds(field(grpo, "task.ops"))).toBe("comma-separated, values: +, -, *, at least 1");
    expect(describeBounds(field(grpo, "reward.weights"))).toBe("JSON");
    expect(describeBounds(field(grpo, "algorithm.mode"))).toBeNull();
  });
});

describe("buildConfig", () => {
  it("sends a new run only what differs from the defaults", () => {
    const built = buildConfig(
      grpo,
      { steps: "60", "algorithm.lr": "1e-4", "model.tiny.heads": "8", "algorithm.tis_cap": null, "task.ops": "+, -" },
      {},
    );
    expect(built.errors).toEqual({});
    expect(built.config).toEqual({
      algorithm: { lr: 1e-4, tis_cap: null },
      model: { tiny: { heads: 8 } },
      task: { ops: ["+", "-"] },
    });
    expect(built.grid).toEqual({});
  });

  it("keeps every key of a clone's config, an emptied field going back to its default", () => {
    const source = {
      seed: 1234,
      steps: 60,
      algorithm: { lr: 0.0005, mode: "sync" },
      task: { ops: ["+"], name: "arithmetic" },
      extra_key_kept: 1,
    };
    const drafts = { ...draftsFrom(grpo, source), "algorithm.lr": "0.001", steps: "" };
    const built = buildConfig(grpo, drafts, source);
    expect(built.config).toEqual({
      seed: 1234,
      steps: 60,
      algorithm: { lr: 0.001, mode: "sync" },
      task: { ops: ["+"], name: "arithmetic" },
      extra_key_kept: 1,
    });
    // A field without a schema default is removed when emptied: the recipe fills it.
    expect(buildConfig(grpo, { ...drafts, "task.ops": "" }, source).config.task).toEqual({ name: "arithmetic" });
    expect(source.algorithm.lr).toBe(0.0005);
  });

  it("reports each bad field, and a required one left empty", () => {
    const schema: JsonSchema = { type: "object", required: ["uri"], properties: { uri: { type: "string" } } };
    expect(buildConfig(flattenSchema(schema), {}, {}).errors).toEqual({ uri: "required" });
    const built = buildConfig(smoke, { steps: "0", interval_s: "fast" }, {});
    expect(built.errors).toEqual({ steps: "must be at least 1", interval_s: '"fast" is not a number' });
    expect(built.config).toEqual({});
  });

  it("in a sweep, puts fields with several values in the grid and leaves the seed to the seeds", () => {
    const built = buildConfig(
      smoke,
      { seed: "7", steps: "1", tasks_per_step: "1, 2", interval_s: "0, 0.1" },
      { seed: 1234, tasks_per_step: 4 },
      { sweep: true },
    );
    expect(built.grid).toEqual({ tasks_per_step: [1, 2], interval_s: [0, 0.1] });
    // The base value stays: the server sets each grid point's value over it.
    expect(built.config).toEqual({ steps: 1, tasks_per_step: 4 });
  });

  it("round-trips a config through the drafts", () => {
    const config = {
      seed: null,
      steps: 5,
      algorithm: { lr: 3e-6, tis_cap: null, mode: "async", reference: false },
      model: { path: "/models/x", tiny: { hidden_size: 64, heads: 4 } },
      task: { ops: ["+", "*"], name: "arithmetic" },
      reward: { weights: { correct: 1, format: 0.1 } },
    };
    expect(buildConfig(grpo, draftsFrom(grpo, config), config).config).toEqual(config);
  });
});

describe("draftsFrom", () => {
  it("shows null as unset only where the default is something else, and a bad type as text to fix", () => {
    const drafts = draftsFrom(grpo, { seed: null, steps: null, algorithm: { tis_cap: null, lr: 1e-7 }, task: { ops: ["+", "-"] } });
    expect(drafts.seed).toBe("");
    expect(drafts["algorithm.tis_cap"]).toBeNull();
    expect(drafts.steps).toBe("null");
    expect(drafts["algorithm.lr"]).toBe("1e-7");
    expect(drafts["task.ops"]).toBe("+, -");
    expect(drafts["algorithm.mode"]).toBe("");
    expect(readField(field(grpo, "steps"), drafts.steps).state).toBe("invalid");
  });

  it("shows a sweep's grid values as lists", () => {
    const drafts = draftsFrom(smoke, { steps: 1 }, { tasks_per_step: [1, 2] });
    expect(drafts.tasks_per_step).toBe("1, 2");
    expect(collapseSweep(smoke, drafts).tasks_per_step).toBe("1");
    expect(collapseSweep(smoke, drafts).steps).toBe("1");
  });
});

describe("the JSON view", () => {
  it("writes a run's config, or a sweep's config and grid, and reads them back", () => {
    const built = buildConfig(smoke, { steps: "3", tasks_per_step: "1, 2" }, {}, { sweep: true });
    const text = jsonDocument(built, true);
    expect(JSON.parse(text)).toEqual({ config: { steps: 3 }, grid: { tasks_per_step: [1, 2] } });
    expect(readJsonDocument(smoke, text, true)).toEqual({ ok: true, config: { steps: 3 }, grid: { tasks_per_step: [1, 2] } });
    expect(readJsonDocument(smoke, jsonDocument(built, false), false)).toEqual({ ok: true, config: { steps: 3 }, grid: {} });
  });

  it("refuses what is not a config", () => {
    expect(readJsonDocument(smoke, "{", false)).toMatchObject({ ok: false });
    expect(readJsonDocument(smoke, "[1]", false)).toEqual({ ok: false, error: "The config must be a JSON object: { … }." });
    expect(readJsonDocument(smoke, '{"config": {}, "grid": {"seed": [1, 2]}}', true)).toEqual({
      ok: false,
      error: '"grid": seed is not a field a sweep can vary.',
    });
    expect(readJsonDocument(smoke, '{"config": {}, "grid": {"steps": []}}', true)).toEqual({
      ok: false,
      error: '"grid": steps must be a non-empty list of values.',
    });
    expect(readJsonDocument(smoke, '{"steps": 1}', true)).toMatchObject({ ok: false });
    // A one-value grid entry is a plain value.
    expect(readJsonDocument(smoke, '{"config": {}, "grid": {"steps": [4]}}', true)).toEqual({
      ok: true,
      config: { steps: 4 },
      grid: {},
    });
  });
});

describe("diffConfigs", () => {
  it("lists only the leaf paths that changed, lists compared whole", () => {
    const before = { steps: 60, algorithm: { lr: 0.0005, mode: "sync" }, task: { ops: ["+"] }, gone: 1 };
    const after = { steps: 60, algorithm: { lr: 0.001, mode: "sync" }, task: { ops: ["+", "-"] }, added: { x: true } };
    expect(diffConfigs(before, after)).toEqual([
      { path: "algorithm.lr", before: 0.0005, after: 0.001 },
      { path: "task.ops", before: ["+"], after: ["+", "-"] },
      { path: "gone", before: 1, after: undefined },
      { path: "added", before: undefined, after: { x: true } },
    ]);
    expect(diffConfigs(before, JSON.parse(JSON.stringify(before)))).toEqual([]);
  });
});

describe("sweep size", () => {
  it("multiplies the values of each swept field and the seeds", () => {
    expect(sweepSize({ "algorithm.lr": [1e-6, 3e-6] }, 3)).toEqual({ factors: [2], points: 2, runs: 6 });
    expect(describeRunCount({ "algorithm.lr": [1e-6, 3e-6] }, 3)).toBe("2 × 3 seeds = 6 runs");
    expect(describeRunCount({ a: [1, 2], b: [1, 2, 3] }, 1)).toBe("2 × 3 × 1 seed = 6 runs");
    expect(describeRunCount({}, 1)).toBe("1 seed = 1 run");
  });

  it("reads a seed count from 1 to 100", () => {
    expect(parseSeeds("3")).toEqual({ ok: true, seeds: 3 });
    expect(parseSeeds("0")).toEqual({ ok: false, error: "must be at least 1" });
    expect(parseSeeds("101")).toEqual({ ok: false, error: "must be at most 100" });
    expect(parseSeeds("")).toEqual({ ok: false, error: "give a count from 1 to 100" });
  });
});

describe("the run's own fields", () => {
  it("reads tags separated by commas or spaces, each as the server allows", () => {
    expect(parseTags("lr-sweep, demo demo  v2")).toEqual({ tags: ["lr-sweep", "demo", "v2"], error: null });
    expect(parseTags("")).toEqual({ tags: [], error: null });
    expect(parseTags("ok, b!d").error).toBe('"b!d": letters, digits and _.:/@+- only, at most 64');
    expect(parseTags("x".repeat(65)).error).not.toBeNull();
  });

  it("reads a project as an id or team/project", () => {
    expect(parseProject("12")).toEqual({ ok: true, project: 12 });
    expect(parseProject(" lab/arith ")).toEqual({ ok: true, project: "lab/arith" });
    expect(parseProject("arith").ok).toBe(false);
    expect(parseProject("lab/").ok).toBe(false);
    expect(parseProject("a/b/c").ok).toBe(false);
  });
});

describe("placeServerErrors", () => {
  const TOP = ["name", "project", "tags", "recipe", "seeds", "grid"];

  it("puts a config path at its field, a rule on a section at the section, the rest on top", () => {
    const placed = placeServerErrors(
      grpo,
      {
        "config.algorithm.lr": ["Input should be greater than 0"],
        "config.model.tiny": ["Value error, heads (3) must divide hidden_size (64)"],
        config: ["Value error, rollout.num_gpus must be at least 1 with rollout.engine 'vllm'"],
        "config.task.ops[1]": ["Input should be '+', '-' or '*'"],
        "config.reward.weights.speed": ["Input should be a valid number"],
        "config.bogus": ["Extra inputs are not permitted"],
        "config.rollout.engine": ["Input should be 'torch' or 'vllm'"],
        name: ["Ensure this field has no more than 200 characters."],
        "tags[1]": ["letters, digits and _.:/@+- only, at most 64"],
        non_field_errors: ["odd"],
      },
      TOP,
    );
    expect(placed.fields).toEqual({
      "algorithm.lr": ["Input should be greater than 0"],
      "task.ops": ["value 2: Input should be '+', '-' or '*'"],
      "reward.weights": ["speed: Input should be a valid number"],
    });
    expect(placed.sections).toEqual({
      "model.tiny": ["Value error, heads (3) must divide hidden_size (64)"],
      "": [
        "Value error, rollout.num_gpus must be at least 1 with rollout.engine 'vllm'",
        "bogus: Extra inputs are not permitted",
        // The trimmed schema has no rollout section: the path is said in full.
        "rollout › engine: Input should be 'torch' or 'vllm'",
      ],
    });
    expect(placed.top).toEqual({
      name: ["Ensure this field has no more than 200 characters."],
      tags: ["value 2: letters, digits and _.:/@+- only, at most 64"],
    });
    expect(placed.rest).toEqual({ non_field_errors: ["odd"] });
  });
});
