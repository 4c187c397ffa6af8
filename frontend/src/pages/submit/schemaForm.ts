/**
 * The submit form's logic, apart from React: a recipe's config schema (the JSON Schema pydantic v2
 * writes: `$defs`/`$ref`, `anyOf` with null, defaults, bounds) flattened to fields with dotted
 * paths; what a person typed read and checked against it; the config (and a sweep's grid) built
 * from the inputs; the server's field errors placed next to their fields; the diff of two configs.
 *
 * A field's input is a draft: "" means "the recipe's default" (the key is left out of a new
 * run's config, so the server fills it), null means "unset" (JSON null, for a nullable field
 * whose default is something else), anything else is parsed by the field's type.
 */

import { plural } from "../../format";
import { shellJoin, shellSplit } from "./shlex";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** The part of JSON Schema that pydantic writes and the form reads. */
export interface JsonSchema {
  type?: string | string[];
  $ref?: string;
  $defs?: Record<string, JsonSchema>;
  definitions?: Record<string, JsonSchema>;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  enum?: Json[];
  const?: Json;
  default?: Json;
  title?: string;
  description?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  /** How the dashboard's form shows the field, where the recipe says (pydantic's
   * `json_schema_extra={"x-ui": ...}`): "command", "lines", "working-dir". */
  "x-ui"?: string;
}

export type ScalarKind = "integer" | "number" | "string" | "boolean" | "enum";
/**
 * `array`: a list of scalars, typed comma-separated; `lines`: one typed per line (x-ui "lines");
 * `command`: a list of words typed as one shell-like line, sent as typed for the server to split
 * (x-ui "command"); `map`: an object of name → scalar (a `dict[str, str]`), edited as rows;
 * `json`: anything else, typed as JSON.
 */
export type FieldKind = ScalarKind | "array" | "lines" | "command" | "map" | "json";

/** What a scalar (a field, or an array's item) accepts. */
export interface ScalarSpec {
  kind: ScalarKind;
  /** An enum's values (a `const`'s one value). */
  options: Json[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
}

export interface Field extends Omit<ScalarSpec, "kind"> {
  /** Dotted: "algorithm.lr". */
  path: string;
  key: string;
  /** The section's path: "" for the config's own fields, "model.tiny" for a nested one. */
  section: string;
  description: string;
  kind: FieldKind;
  nullable: boolean;
  required: boolean;
  /** False where the schema gives none (a pydantic default_factory): the recipe fills it. */
  hasDefault: boolean;
  default: Json | undefined;
  /** A `const`: shown, never edited. */
  readOnly: boolean;
  /** The schema's x-ui hint ("working-dir": a string filled by an upload). */
  ui?: string;
  /** A list's items, a map's values. */
  item?: ScalarSpec;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  /** The resolved schema and the document its references point into, for a `json` field's checks. */
  schema: JsonSchema;
  root: JsonSchema;
}

export interface Section {
  path: string;
  description: string;
  fields: Field[];
}

export interface FormSpec {
  sections: Section[];
  fields: Field[];
  byPath: ReadonlyMap<string, Field>;
  sectionPaths: ReadonlySet<string>;
}

/** Drafts by field path. */
export type Draft = string | null;
export type Drafts = Record<string, Draft>;

/** The config field a sweep sets from its seeds: the server refuses it in a grid. */
export const SEED_PATH = "seed";
/** The server's limit on a sweep (controlplane.runs.groups.MAX_SWEEP_RUNS). */
export const MAX_SWEEP_RUNS = 200;
/** Seeds per sweep (SweepSubmitSerializer.validate_seeds). */
export const MAX_SEEDS = 100;
/** A grid path has at most 8 parts (GRID_PATH); sections deeper than that are typed as JSON. */
const MAX_DEPTH = 8;

// ---------------------------------------------------------------- JSON helpers

export function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function deepEqual(a: Json | undefined, b: Json | undefined): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((item, i) => deepEqual(item, b[i]));
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((key) => key in b && deepEqual(a[key], b[key]));
  }
  return false;
}

export function cloneJson<T extends Json>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

export function getPath(config: Json | undefined, path: string): Json | undefined {
  let node: Json | undefined = config;
  for (const part of path.split(".")) {
    if (!isObject(node) || !(part in node)) return undefined;
    node = node[part];
  }
  return node;
}

export function hasPath(config: Json | undefined, path: string): boolean {
  return getPath(config, path) !== undefined;
}

/** Set `path` in `config` (in place), making parent objects as needed, as the server's config_with does. */
export function setPath(config: JsonObject, path: string, value: Json): void {
  const parts = path.split(".");
  const leaf = parts.pop() as string;
  let node = config;
  for (const part of parts) {
    const child = node[part];
    if (isObject(child)) node = child;
    else {
      const made: JsonObject = {};
      node[part] = made;
      node = made;
    }
  }
  node[leaf] = value;
}

export function deletePath(config: JsonObject, path: string): void {
  const parts = path.split(".");
  const leaf = parts.pop() as string;
  let node: Json | undefined = config;
  for (const part of parts) {
    if (!isObject(node)) return;
    node = node[part];
  }
  if (isObject(node)) delete node[leaf];
}

// ---------------------------------------------------------------- schema → fields

function lookup(root: JsonSchema, ref: string): JsonSchema | undefined {
  if (!ref.startsWith("#/")) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(2).split("/")) {
    const part = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (!isObject(node)) return undefined;
    node = node[part];
  }
  return isObject(node) ? (node as JsonSchema) : undefined;
}

/**
 * `schema` with its `$ref` (or a lone `allOf`, as older pydantic wrote a described reference)
 * followed; the keys beside the reference (a property's default and description) win.
 */
export function resolveRef(schema: JsonSchema, root: JsonSchema, seen: ReadonlySet<string> = new Set()): JsonSchema {
  const { $ref, ...rest } = schema;
  if ($ref !== undefined) {
    const target = seen.has($ref) ? undefined : lookup(root, $ref);
    if (!target) return rest;
    return { ...resolveRef(target, root, new Set([...seen, $ref])), ...rest };
  }
  if (schema.allOf?.length === 1 && !schema.properties && schema.allOf[0]) {
    const { allOf, ...siblings } = schema;
    return { ...resolveRef(allOf[0] as JsonSchema, root, seen), ...siblings };
  }
  return schema;
}

/** A property's schema with null taken out of its `anyOf` (an optional field); `union` when
 * more than one other type is left (typed as JSON). */
export function unwrapNullable(
  schema: JsonSchema,
  root: JsonSchema,
): { schema: JsonSchema; nullable: boolean; union: boolean } {
  const resolved = resolveRef(schema, root);
  const branches = resolved.anyOf ?? resolved.oneOf;
  if (branches) {
    const { anyOf: _a, oneOf: _o, ...outer } = resolved;
    const inner = branches.map((branch) => resolveRef(branch, root));
    const others = inner.filter((branch) => branch.type !== "null");
    const nullable = others.length < inner.length;
    if (others.length === 1 && others[0]) return { schema: { ...others[0], ...outer }, nullable, union: false };
    return { schema: resolved, nullable, union: true };
  }
  if (Array.isArray(resolved.type)) {
    const types = resolved.type.filter((t) => t !== "null");
    const nullable = types.length < resolved.type.length;
    if (types.length === 1) return { schema: { ...resolved, type: types[0] }, nullable, union: false };
    return { schema: resolved, nullable, union: types.length > 1 };
  }
  return { schema: resolved, nullable: false, union: false };
}

function scalarSpec(schema: JsonSchema): ScalarSpec | null {
  const bounds = {
    minimum: schema.minimum,
    maximum: schema.maximum,
    exclusiveMinimum: schema.exclusiveMinimum,
    exclusiveMaximum: schema.exclusiveMaximum,
    minLength: schema.minLength,
    maxLength: schema.maxLength,
    pattern: schema.pattern,
  };
  if (schema.const !== undefined) return { kind: "enum", options: [schema.const], ...bounds };
  if (schema.enum) return { kind: "enum", options: schema.enum, ...bounds };
  if (schema.type === "integer" || schema.type === "number" || schema.type === "string" || schema.type === "boolean") {
    return { kind: schema.type, options: [], ...bounds };
  }
  return null;
}

function isSection(schema: JsonSchema): boolean {
  return (schema.type === "object" || schema.type === undefined) && schema.properties !== undefined;
}

/** The recipe's config schema as sections of fields, the config's own fields first. */
export function flattenSchema(root: JsonSchema): FormSpec {
  const sections: Section[] = [];
  const fields: Field[] = [];

  const walk = (schema: JsonSchema, path: string, parentDefault: Json | undefined, depth: number) => {
    const section: Section = { path, description: path ? (schema.description ?? "") : "", fields: [] };
    sections.push(section);
    const required = new Set(schema.required ?? []);
    for (const [key, property] of Object.entries(schema.properties ?? {})) {
      const fieldPath = path ? `${path}.${key}` : key;
      const { schema: own, nullable, union } = unwrapNullable(property, root);
      // A nested model's fields get their defaults from its own schema, or from the default the
      // parent gives the whole object.
      const inherited = isObject(parentDefault) ? parentDefault[key] : undefined;
      const fallback = own.default !== undefined ? own.default : inherited;
      if (!nullable && !union && isSection(own) && depth < MAX_DEPTH) {
        walk(own, fieldPath, fallback, depth + 1);
        continue;
      }
      const field = makeField(own, { key, path: fieldPath, section: path, nullable, union, root });
      field.required = required.has(key);
      if (fallback !== undefined) {
        field.hasDefault = true;
        field.default = fallback;
      }
      section.fields.push(field);
      fields.push(field);
    }
  };
  walk(resolveRef(root, root), "", undefined, 1);

  const kept = sections.filter((s) => s.fields.length > 0);
  return {
    sections: kept,
    fields,
    byPath: new Map(fields.map((f) => [f.path, f])),
    sectionPaths: new Set(kept.map((s) => s.path)),
  };
}

function makeField(
  schema: JsonSchema,
  where: { key: string; path: string; section: string; nullable: boolean; union: boolean; root: JsonSchema },
): Field {
  const base = {
    path: where.path,
    key: where.key,
    section: where.section,
    description: schema.description ?? "",
    nullable: where.nullable,
    required: false,
    hasDefault: false,
    default: undefined,
    readOnly: schema.const !== undefined,
    ...(typeof schema["x-ui"] === "string" ? { ui: schema["x-ui"] } : {}),
    schema,
    root: where.root,
  };
  const scalar = where.union ? null : scalarSpec(schema);
  if (scalar) return { ...base, ...scalar };
  if (!where.union && schema.type === "array" && schema.items) {
    const { schema: itemSchema, nullable, union } = unwrapNullable(schema.items, where.root);
    const item = nullable || union ? null : scalarSpec(itemSchema);
    if (item) {
      const kind: FieldKind =
        base.ui === "command" && item.kind === "string" ? "command" : base.ui === "lines" ? "lines" : "array";
      return {
        ...base,
        kind,
        options: [],
        item,
        minItems: schema.minItems,
        maxItems: schema.maxItems,
        uniqueItems: schema.uniqueItems,
      };
    }
  }
  const values = schema.additionalProperties;
  if (!where.union && schema.type === "object" && !schema.properties && typeof values === "object") {
    const { schema: valueSchema, nullable, union } = unwrapNullable(values, where.root);
    // A dict[str, str] (a command's env); other maps (reward weights by name) stay JSON.
    const item = nullable || union ? null : scalarSpec(valueSchema);
    if (item?.kind === "string") return { ...base, kind: "map", options: [], item };
  }
  return { ...base, kind: "json", options: [] };
}

// ---------------------------------------------------------------- reading drafts

const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

export function formatScalar(value: Json): string {
  if (typeof value === "string") return value;
  if (value === null || typeof value === "number" || typeof value === "boolean") return String(value);
  return JSON.stringify(value);
}

/** A bound as a person reads it: 1e-6 stays 1e-6, 0.5 stays 0.5. */
export function formatNumber(value: number): string {
  return String(value);
}

function boundsProblem(spec: ScalarSpec, n: number): string | null {
  if (spec.minimum !== undefined && n < spec.minimum) return `must be at least ${formatNumber(spec.minimum)}`;
  if (spec.exclusiveMinimum !== undefined && n <= spec.exclusiveMinimum) {
    return `must be more than ${formatNumber(spec.exclusiveMinimum)}`;
  }
  if (spec.maximum !== undefined && n > spec.maximum) return `must be at most ${formatNumber(spec.maximum)}`;
  if (spec.exclusiveMaximum !== undefined && n >= spec.exclusiveMaximum) {
    return `must be less than ${formatNumber(spec.exclusiveMaximum)}`;
  }
  return null;
}

export type ScalarRead = { ok: true; value: Json } | { ok: false; error: string };

/** One value typed into a scalar input, checked against its type, bounds and choices. */
export function parseScalar(spec: ScalarSpec, text: string): ScalarRead {
  const trimmed = text.trim();
  switch (spec.kind) {
    case "integer":
    case "number": {
      const n = Number(trimmed);
      if (!NUMBER.test(trimmed) || !Number.isFinite(n)) {
        const many = trimmed.includes(",") ? " (turn Sweep on to give several)" : "";
        return { ok: false, error: `${JSON.stringify(trimmed)} is not a number${many}` };
      }
      if (spec.kind === "integer" && !Number.isSafeInteger(n)) {
        return { ok: false, error: `must be a whole number, not ${trimmed}` };
      }
      const problem = boundsProblem(spec, n);
      return problem ? { ok: false, error: problem } : { ok: true, value: n };
    }
    case "boolean": {
      const lower = trimmed.toLowerCase();
      if (lower === "true" || lower === "false") return { ok: true, value: lower === "true" };
      return { ok: false, error: `must be true or false, not ${JSON.stringify(trimmed)}` };
    }
    case "enum": {
      const found = spec.options.find((option) => formatScalar(option) === trimmed);
      if (found !== undefined) return { ok: true, value: found };
      return { ok: false, error: `must be one of ${spec.options.map(formatScalar).join(", ")}` };
    }
    case "string": {
      if (spec.minLength !== undefined && text.length < spec.minLength) {
        return { ok: false, error: `must be at least ${spec.minLength} characters` };
      }
      if (spec.maxLength !== undefined && text.length > spec.maxLength) {
        return { ok: false, error: `must be at most ${spec.maxLength} characters` };
      }
      if (spec.pattern !== undefined && !safeRegExp(spec.pattern)?.test(text)) {
        return { ok: false, error: `must match ${spec.pattern}` };
      }
      return { ok: true, value: text };
    }
  }
}

function safeRegExp(pattern: string): RegExp | null {
  try {
    return new RegExp(pattern, "u");
  } catch {
    return null; // a Python-only pattern: the server checks it
  }
}

/** "1e-6, 3e-6" → ["1e-6", "3e-6"]; "" → []. */
export function splitList(text: string): string[] {
  return text.trim() === "" ? [] : text.split(",").map((item) => item.trim());
}

/** Kinds whose value is a list or an object, typed whole. */
const COMPOSITE: ReadonlySet<FieldKind> = new Set(["array", "lines", "command", "map", "json"]);

/** Whether a sweep may vary the field: a scalar one the server lets a grid set. */
export function isSweepable(field: Field): boolean {
  return !COMPOSITE.has(field.kind) && !field.readOnly && field.path !== SEED_PATH;
}

// ---------------------------------------------------------------- a map's rows

/** A map field's rows as edited: a name and a value each, blank rows included. */
export type MapRow = [name: string, value: string];

/** A map's draft: its rows as JSON ("" for the default). */
export function mapDraft(rows: readonly MapRow[]): Draft {
  return JSON.stringify(rows);
}

/** The rows a map's draft holds; a draft not written by mapDraft reads as none. */
export function mapRows(draft: Draft | undefined): MapRow[] {
  if (!draft) return [];
  try {
    const rows: unknown = JSON.parse(draft);
    if (Array.isArray(rows)) {
      return rows.filter(
        (row): row is MapRow => Array.isArray(row) && row.length === 2 && row.every((part) => typeof part === "string"),
      );
    }
  } catch {
    // fall through
  }
  return [];
}

function readMap(field: Field, text: string): FieldRead {
  const value: JsonObject = {};
  const rows = mapRows(text).filter(([name, item]) => name !== "" || item !== "");
  if (rows.length === 0) return { state: "default" };
  for (const [index, [typed, item]] of rows.entries()) {
    const name = typed.trim();
    if (name === "") return { state: "invalid", error: `row ${index + 1} has a value but no name` };
    if (name in value) return { state: "invalid", error: `${name} is given twice` };
    const read = field.item ? parseScalar(field.item, item) : ({ ok: true, value: item } as const);
    if (!read.ok) return { state: "invalid", error: `${name}: ${read.error}` };
    value[name] = read.value;
  }
  return { state: "value", value };
}

/** A `lines` field's draft: its items, one per line; blank lines are left out. */
export function splitLines(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter(Boolean);
}

/** What a field's draft says: the default, a value, several values (a swept field), or a problem. */
export type FieldRead =
  | { state: "default" }
  | { state: "value"; value: Json }
  | { state: "sweep"; values: Json[] }
  | { state: "invalid"; error: string };

function itemLabel(index: number, text: string): string {
  return `value ${index + 1} (${JSON.stringify(text)})`;
}

export function readField(field: Field, draft: Draft | undefined, sweep = false): FieldRead {
  if (draft === null) {
    return field.nullable ? { state: "value", value: null } : { state: "invalid", error: "cannot be unset" };
  }
  const text = draft ?? "";
  if (field.kind === "string" ? text === "" : text.trim() === "") return { state: "default" };

  if (field.kind === "json") {
    let value: Json;
    try {
      value = JSON.parse(text) as Json;
    } catch (error) {
      return { state: "invalid", error: `not valid JSON: ${error instanceof Error ? error.message : String(error)}` };
    }
    const problem = jsonProblem(field.schema, value, field.root);
    return problem ? { state: "invalid", error: problem } : { state: "value", value };
  }

  if (field.kind === "map") return readMap(field, text);

  // The line as typed: the server splits it (a clone keeps its list when the words are the same).
  if (field.kind === "command") return { state: "value", value: text.trim() };

  if ((field.kind === "array" || field.kind === "lines") && field.item) {
    const lines = field.kind === "lines";
    const items = lines ? splitLines(text) : splitList(text);
    const values: Json[] = [];
    for (const [index, item] of items.entries()) {
      if (item === "") return { state: "invalid", error: `value ${index + 1} is empty: remove the extra comma` };
      const read = parseScalar(field.item, item);
      if (!read.ok) return { state: "invalid", error: `${lines ? `line ${JSON.stringify(item)}` : itemLabel(index, item)} ${read.error}` };
      values.push(read.value);
    }
    if (field.minItems !== undefined && values.length < field.minItems) {
      return { state: "invalid", error: `give at least ${plural(field.minItems, "value")}` };
    }
    if (field.maxItems !== undefined && values.length > field.maxItems) {
      return { state: "invalid", error: `give at most ${field.maxItems} values` };
    }
    if (field.uniqueItems && new Set(values.map((v) => JSON.stringify(v))).size !== values.length) {
      return { state: "invalid", error: "a value is given twice" };
    }
    if (lines && values.length === 0) return { state: "default" };
    return { state: "value", value: values };
  }

  const spec = field as ScalarSpec;
  if (sweep && isSweepable(field)) {
    const items = field.kind === "string" ? text.split(",") : splitList(text);
    if (items.length > 1) {
      const values: Json[] = [];
      for (const [index, item] of items.entries()) {
        if (item.trim() === "") return { state: "invalid", error: `value ${index + 1} is empty: remove the extra comma` };
        const read = parseScalar(spec, field.kind === "string" ? item.trim() : item);
        if (!read.ok) return { state: "invalid", error: `${itemLabel(index, item.trim())} ${read.error}` };
        values.push(read.value);
      }
      const seen = new Set<string>();
      for (const value of values) {
        const key = JSON.stringify(value);
        if (seen.has(key)) return { state: "invalid", error: `${formatScalar(value)} is given twice` };
        seen.add(key);
      }
      return { state: "sweep", values };
    }
  }
  const read = parseScalar(spec, text);
  return read.ok ? { state: "value", value: read.value } : { state: "invalid", error: read.error };
}

/** Why `value` does not fit `schema` (the checks a JSON-typed field gets), or null. */
export function jsonProblem(raw: JsonSchema, value: Json, root: JsonSchema, where = ""): string | null {
  const schema = resolveRef(raw, root);
  const at = (problem: string) => (where ? `${where}: ${problem}` : problem);
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches) {
    const problems = branches.map((branch) => jsonProblem(branch, value, root, where));
    return problems.some((p) => p === null) ? null : (problems[0] ?? null);
  }
  if (schema.const !== undefined && !deepEqual(schema.const, value)) return at(`must be ${formatScalar(schema.const)}`);
  if (schema.enum && !schema.enum.some((option) => deepEqual(option, value))) {
    return at(`must be one of ${schema.enum.map(formatScalar).join(", ")}`);
  }
  const types = schema.type === undefined ? [] : Array.isArray(schema.type) ? schema.type : [schema.type];
  if (types.length > 0 && !types.some((t) => jsonType(value, t))) return at(`must be ${types.join(" or ")}`);
  if (typeof value === "number") {
    const problem = boundsProblem({ kind: "number", options: [], ...schema }, value);
    if (problem) return at(problem);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) return at(`needs at least ${schema.minItems} items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) return at(`takes at most ${schema.maxItems} items`);
    if (schema.items) {
      for (const [index, item] of value.entries()) {
        const problem = jsonProblem(schema.items, item, root, `${where}[${index}]`);
        if (problem) return problem;
      }
    }
  }
  if (isObject(value)) {
    for (const key of schema.required ?? []) if (!(key in value)) return at(`${key} is required`);
    const extra = schema.additionalProperties;
    for (const [key, item] of Object.entries(value)) {
      const own = schema.properties?.[key];
      const child = where ? `${where}.${key}` : key;
      if (own) {
        const problem = jsonProblem(own, item, root, child);
        if (problem) return problem;
      } else if (extra === false && schema.properties) {
        return at(`unknown key ${key}`);
      } else if (typeof extra === "object") {
        const problem = jsonProblem(extra, item, root, child);
        if (problem) return problem;
      }
    }
  }
  return null;
}

function jsonType(value: Json, type: string): boolean {
  switch (type) {
    case "null":
      return value === null;
    case "boolean":
      return typeof value === "boolean";
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "number":
      return typeof value === "number";
    case "string":
      return typeof value === "string";
    case "array":
      return Array.isArray(value);
    case "object":
      return isObject(value);
    default:
      return true;
  }
}

/** How a field's draft compares with its default, for its badge. */
export type FieldStatus = "default" | "changed" | "set" | "swept" | "invalid";

export function fieldStatus(field: Field, draft: Draft | undefined, sweep = false): FieldStatus {
  // A sweep gives each run one of its seeds, whatever the field says.
  if (sweep && field.path === SEED_PATH) return "swept";
  const read = readField(field, draft, sweep);
  if (read.state === "invalid") return "invalid";
  if (read.state === "sweep") return "swept";
  if (read.state === "default") return "default";
  if (!field.hasDefault) return "set";
  return deepEqual(read.value, field.default) ? "default" : "changed";
}

/** "default 20", "default unset", or who fills it when the schema does not say. */
export function describeDefault(field: Field): string | null {
  if (field.readOnly) return null;
  if (!field.hasDefault) return field.required ? null : "default set by the recipe";
  const value = field.default ?? null;
  return `default ${value === null ? "unset" : typeof value === "object" ? JSON.stringify(value) : formatScalar(value)}`;
}

/** A field's limits as a person reads them: "≥ 1, ≤ 64", "> 0", "1 to 64 characters", "values: +, -, *". */
export function describeBounds(field: Field): string | null {
  const numeric = (spec: Omit<ScalarSpec, "kind">) =>
    [
      spec.minimum !== undefined ? `≥ ${formatNumber(spec.minimum)}` : null,
      spec.exclusiveMinimum !== undefined ? `> ${formatNumber(spec.exclusiveMinimum)}` : null,
      spec.maximum !== undefined ? `≤ ${formatNumber(spec.maximum)}` : null,
      spec.exclusiveMaximum !== undefined ? `< ${formatNumber(spec.exclusiveMaximum)}` : null,
    ].filter((part): part is string => part !== null);
  const parts: string[] = [];
  if (field.kind === "integer") parts.push("whole number", ...numeric(field));
  else if (field.kind === "number") parts.push(...numeric(field));
  else if (field.kind === "string") {
    if (field.minLength !== undefined && field.minLength > 0) parts.push(`at least ${field.minLength} characters`);
    if (field.maxLength !== undefined) parts.push(`at most ${field.maxLength} characters`);
  } else if (field.kind === "array" && field.item) {
    parts.push("comma-separated");
    if (field.item.kind === "enum") parts.push(`values: ${field.item.options.map(formatScalar).join(", ")}`);
    else parts.push(...numeric(field.item).map((p) => `each ${p}`));
    if (field.minItems !== undefined && field.minItems > 0) parts.push(`at least ${field.minItems}`);
    if (field.maxItems !== undefined) parts.push(`at most ${field.maxItems}`);
  } else if (field.kind === "lines") {
    parts.push("one per line");
    if (field.maxItems !== undefined) parts.push(`at most ${field.maxItems}`);
  } else if (field.kind === "command") parts.push("one line, split into words as a POSIX shell would");
  else if (field.kind === "map") parts.push("a name and a value per row");
  else if (field.kind === "json") parts.push("JSON");
  return parts.length > 0 ? parts.join(", ") : null;
}

// ---------------------------------------------------------------- drafts ↔ config

/** The drafts that show `config` (and a sweep's `grid`) in the form. */
export function draftsFrom(spec: FormSpec, config: JsonObject, grid: Record<string, Json[]> = {}): Drafts {
  const drafts: Drafts = {};
  for (const field of spec.fields) {
    const swept = grid[field.path];
    if (swept) {
      drafts[field.path] = swept.map(formatScalar).join(", ");
      continue;
    }
    const value = getPath(config, field.path);
    drafts[field.path] = draftOf(field, value);
  }
  return drafts;
}

function draftOf(field: Field, value: Json | undefined): Draft {
  if (value === undefined) return "";
  if (value === null) {
    // A null where the default is null reads as the default; elsewhere as "unset". A field that
    // cannot be null shows the text, which its check then refuses: nothing is quietly dropped.
    if (!field.nullable) return "null";
    return field.hasDefault && field.default === null ? "" : null;
  }
  if (field.kind === "json") return JSON.stringify(value);
  if (field.kind === "command") {
    if (typeof value === "string") return value;
    return Array.isArray(value) && value.every((v) => typeof v === "string") ? shellJoin(value) : JSON.stringify(value);
  }
  if (field.kind === "map") {
    if (!isObject(value)) return JSON.stringify(value);
    return mapDraft(Object.entries(value).map(([name, item]): MapRow => [name, formatScalar(item)]));
  }
  if (field.kind === "lines") {
    return Array.isArray(value) && value.every((v) => !isObject(v) && !Array.isArray(v))
      ? value.map(formatScalar).join("\n")
      : JSON.stringify(value);
  }
  if (field.kind === "array") {
    return Array.isArray(value) && value.every((v) => !isObject(v) && !Array.isArray(v))
      ? value.map(formatScalar).join(", ")
      : JSON.stringify(value);
  }
  return formatScalar(value);
}

export interface Built {
  /** The config to send. */
  config: JsonObject;
  /** A sweep's fields with several values, by path. */
  grid: Record<string, Json[]>;
  /** Problems by field path; "required" for a required field left empty. */
  errors: Record<string, string>;
}

export const REQUIRED = "required";

/**
 * The config the drafts describe, on top of `base` (nothing for a new run: what is left at its
 * default stays out and the server fills it; the source run's config for a clone; what the JSON
 * view last held). A value equal to the default is left out unless `base` has the key, so a new
 * run's config holds only what was changed, and a clone's keeps every key it had.
 */
export function buildConfig(spec: FormSpec, drafts: Drafts, base: JsonObject, { sweep = false } = {}): Built {
  const config = cloneJson(base);
  const grid: Record<string, Json[]> = {};
  const errors: Record<string, string> = {};
  for (const field of spec.fields) {
    if (sweep && field.path === SEED_PATH) {
      // Each of a sweep's runs gets one of its seeds.
      deletePath(config, SEED_PATH);
      continue;
    }
    const read = readField(field, drafts[field.path], sweep);
    switch (read.state) {
      case "invalid":
        errors[field.path] = read.error;
        break;
      case "sweep":
        grid[field.path] = read.values;
        break;
      case "default":
        if (field.required && !field.hasDefault) errors[field.path] = REQUIRED;
        if (hasPath(base, field.path)) {
          if (field.hasDefault) setPath(config, field.path, cloneJson(field.default ?? null));
          // No rows, no lines: empty (a clone's `pip: []` stays as it was), not the recipe's to fill.
          else if (field.kind === "map") setPath(config, field.path, {});
          else if (field.kind === "lines") setPath(config, field.path, []);
          else deletePath(config, field.path);
        }
        break;
      case "value":
        if (!hasPath(base, field.path) && field.hasDefault && deepEqual(read.value, field.default)) break;
        if (field.kind === "command" && sameCommand(getPath(base, field.path), read.value)) break;
        setPath(config, field.path, read.value);
        break;
    }
  }
  return { config, grid, errors };
}

/** Whether a command line as typed says the words `before` holds (a clone's unchanged command
 * keeps its list rather than going back as a line). */
function sameCommand(before: Json | undefined, line: Json): boolean {
  if (typeof line !== "string" || !Array.isArray(before)) return false;
  const split = shellSplit(line);
  return split.ok && deepEqual(split.words, before);
}

/** On turning a sweep off: each swept field keeps its first value. */
export function collapseSweep(spec: FormSpec, drafts: Drafts): Drafts {
  const out: Drafts = { ...drafts };
  for (const field of spec.fields) {
    const read = readField(field, drafts[field.path], true);
    if (read.state === "sweep" && read.values[0] !== undefined) out[field.path] = formatScalar(read.values[0]);
  }
  return out;
}

/** The JSON view's text: the config, or for a sweep `{config, grid}` as POST /sweeps takes them. */
export function jsonDocument(built: Pick<Built, "config" | "grid">, sweep: boolean): string {
  return JSON.stringify(sweep ? { config: built.config, grid: built.grid } : built.config, null, 2);
}

export type JsonDocumentRead =
  | { ok: true; config: JsonObject; grid: Record<string, Json[]> }
  | { ok: false; error: string };

/** The JSON view's text read back; a grid may only name fields a sweep can vary. */
export function readJsonDocument(spec: FormSpec, text: string, sweep: boolean): JsonDocumentRead {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    return { ok: false, error: `Not valid JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
  if (!isObject(doc)) return { ok: false, error: "The config must be a JSON object: { … }." };
  if (!sweep) return { ok: true, config: doc as JsonObject, grid: {} };
  const { config, grid = {}, ...rest } = doc as JsonObject;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) {
    return { ok: false, error: `A sweep's JSON has "config" and "grid" only, not ${unknown.map((k) => JSON.stringify(k)).join(", ")}.` };
  }
  if (!isObject(config)) return { ok: false, error: '"config" must be a JSON object.' };
  if (!isObject(grid)) return { ok: false, error: '"grid" must be an object of lists: {"algorithm.lr": [1e-6, 3e-6]}.' };
  const out: Record<string, Json[]> = {};
  for (const [path, values] of Object.entries(grid)) {
    const field = spec.byPath.get(path);
    if (!field || !isSweepable(field)) return { ok: false, error: `"grid": ${path} is not a field a sweep can vary.` };
    if (!Array.isArray(values) || values.length === 0 || values.some((v) => isObject(v) || Array.isArray(v))) {
      return { ok: false, error: `"grid": ${path} must be a non-empty list of values.` };
    }
    if (values.length === 1) setPath(config, path, values[0] as Json);
    else out[path] = values;
  }
  return { ok: true, config, grid: out };
}

// ---------------------------------------------------------------- diff, sweep size

export interface Change {
  path: string;
  /** undefined: the key is absent on that side. */
  before: Json | undefined;
  after: Json | undefined;
}

/** The leaf paths where two configs differ (a list compared whole), in `before`'s key order. */
export function diffConfigs(before: Json | undefined, after: Json | undefined, path = ""): Change[] {
  if (isObject(before) && isObject(after)) {
    const keys = [...Object.keys(before), ...Object.keys(after).filter((k) => !(k in before))];
    return keys.flatMap((key) => diffConfigs(before[key], after[key], path ? `${path}.${key}` : key));
  }
  return deepEqual(before, after) ? [] : [{ path, before, after }];
}

export interface SweepSize {
  /** Values per swept field, in the grid's order. */
  factors: number[];
  points: number;
  runs: number;
}

export function sweepSize(grid: Record<string, Json[]>, seeds: number): SweepSize {
  const factors = Object.values(grid).map((values) => values.length);
  const points = factors.reduce((a, b) => a * b, 1);
  return { factors, points, runs: points * seeds };
}

/** "2 × 3 seeds = 6 runs"; "1 seed = 1 run" with nothing swept. */
export function describeRunCount(grid: Record<string, Json[]>, seeds: number): string {
  const { factors, runs } = sweepSize(grid, seeds);
  const seedText = plural(seeds, "seed");
  return `${[...factors.map(String), seedText].join(" × ")} = ${plural(runs, "run")}`;
}

/** A seed count as typed: a whole number from 1 to MAX_SEEDS. */
export function parseSeeds(text: string): { ok: true; seeds: number } | { ok: false; error: string } {
  const read = parseScalar({ kind: "integer", options: [], minimum: 1, maximum: MAX_SEEDS }, text);
  if (text.trim() === "") return { ok: false, error: `give a count from 1 to ${MAX_SEEDS}` };
  return read.ok ? { ok: true, seeds: read.value as number } : { ok: false, error: read.error };
}

// ---------------------------------------------------------------- the run's own fields

const TAG = /^[\p{L}\p{N}_.:/@+-]{1,64}$/u;
export const NAME_MAX = 200;

/** Tags as typed, separated by commas or spaces; each as the server allows it. */
export function parseTags(text: string): { tags: string[]; error: string | null } {
  const tags = [...new Set(text.split(/[\s,]+/).filter(Boolean))];
  const bad = tags.filter((tag) => !TAG.test(tag));
  const error =
    bad.length > 0
      ? `${bad.map((t) => JSON.stringify(t)).join(", ")}: letters, digits and _.:/@+- only, at most 64`
      : tags.length > 50
        ? "at most 50 tags"
        : null;
  return { tags, error };
}

/** A project as typed: an id, or "team/project" (the server makes a missing project). */
export function parseProject(text: string): { ok: true; project: number | string } | { ok: false; error: string } {
  const trimmed = text.trim();
  if (/^\d+$/.test(trimmed)) return { ok: true, project: Number(trimmed) };
  const parts = trimmed.split("/");
  if (parts.length === 2 && parts[0]?.trim() && parts[1]?.trim()) return { ok: true, project: trimmed };
  return { ok: false, error: "give team/project, such as lab/arith" };
}

// ---------------------------------------------------------------- the server's errors

export interface PlacedErrors {
  /** By form field path. */
  fields: Record<string, string[]>;
  /** By section path; "" is the config as a whole (a rule that relates fields of several sections). */
  sections: Record<string, string[]>;
  /** By one of the form's own inputs (name, project, tags, seeds, grid...). */
  top: Record<string, string[]>;
  /** Keys with no place on the form, as the server wrote them. */
  rest: Record<string, string[]>;
}

function add(into: Record<string, string[]>, key: string, messages: string[]): void {
  (into[key] ??= []).push(...messages);
}

/** "[0]" → "value 1", ".foo[2]" → "foo › value 3": what is left of a path below its field. */
function describeRest(rest: string): string {
  const parts = rest.match(/\[\d+\]|[^.[\]]+/g) ?? [];
  return parts.map((part) => (part.startsWith("[") ? `value ${Number(part.slice(1, -1)) + 1}` : part)).join(" › ");
}

/**
 * The server's `fields` ({"config.algorithm.lr": [...], "config.model.tiny": [...], "tags[1]":
 * [...]}) placed on the form: a config path at its field, or the closest section or field above
 * it (a rule relating a section's fields is reported on the section), with what is left of the
 * path said in the message.
 */
export function placeServerErrors(
  spec: FormSpec,
  fields: Record<string, string[]>,
  topKeys: readonly string[],
): PlacedErrors {
  const placed: PlacedErrors = { fields: {}, sections: {}, top: {}, rest: {} };
  for (const [key, messages] of Object.entries(fields)) {
    if (key === "config" || key.startsWith("config.") || key.startsWith("config[")) {
      const path = key.slice("config".length).replace(/^\./, "");
      const dotted = path.replace(/\[\d+\]/g, "");
      const parts = dotted ? dotted.split(".") : [];
      let put = false;
      for (let n = parts.length; n >= 0 && !put; n--) {
        const candidate = parts.slice(0, n).join(".");
        const isField = spec.byPath.has(candidate);
        if (!isField && !spec.sectionPaths.has(candidate) && candidate !== "") continue;
        // What of the server's path is below the place found, with list indices kept.
        const below = rest(path, n);
        const text = below ? messages.map((m) => `${describeRest(below)}: ${m}`) : messages;
        add(isField ? placed.fields : placed.sections, candidate, text);
        put = true;
      }
      continue;
    }
    const bare = key.replace(/\[\d+\].*$/, "");
    if (topKeys.includes(bare)) {
      const below = key.slice(bare.length);
      add(placed.top, bare, below ? messages.map((m) => `${describeRest(below)}: ${m}`) : messages);
    } else add(placed.rest, key, messages);
  }
  return placed;
}

/** `path` ("task.ops[0].x") without its first `n` dotted names: "[0].x". */
function rest(path: string, n: number): string {
  const tokens = path.match(/\[\d+\]|[^.[\]]+/g) ?? [];
  let names = 0;
  let index = 0;
  while (index < tokens.length && names < n) {
    if (!tokens[index]?.startsWith("[")) names += 1;
    index += 1;
  }
  return tokens
    .slice(index)
    .map((token) => (token.startsWith("[") ? token : `.${token}`))
    .join("")
    .replace(/^\./, "");
}
