import { differingNames, formatConfigValue, stableStringify, valueAt } from "./config";

/**
 * Runs grouped after the fact by a key, written as POST /compare/stats's `group_by` reads it
 * (controlplane/compare/grouping.py), so that the page's `by=` and the statistics panel agree:
 * - a config path, bare (`optim.lr`) or `config.optim.lr`; runs without it are "(unset)";
 * - `tag:<prefix>`: tags written `<prefix>:<value>` (or `<prefix>=<value>`) group by their value;
 *   runs without one are "(none)", and a run with two of different values is an error naming it
 *   (a run is one sample of one group);
 * - `param:<name>`: the run's MLflow param (external runs keep their params there); "(none)" without.
 */
export type GroupKey =
  | { kind: "config"; path: string }
  | { kind: "tag"; prefix: string }
  | { kind: "param"; name: string };

const TAG = "tag:";
const PARAM = "param:";
const CONFIG = "config.";
/** What a tag may hold (the API's tag rule, whose \w is Python's: any letter or digit): a prefix is made of the same. */
const TAG_PREFIX = /^[\p{L}\p{N}_.:/@+-]+$/u;
/** `word:` at the start reads as a kind of key; an unknown one is a typo, not a config path. */
const KIND = /^[A-Za-z_]+:/;
export const GROUP_KEY_SYNTAX = "a config path (optim.lr or config.optim.lr), tag:<prefix> or param:<name>";

/** The key `text` writes, or null where the server would refuse it. */
export function parseGroupKey(text: string): GroupKey | null {
  if (text.startsWith(TAG)) {
    const prefix = text.slice(TAG.length);
    return TAG_PREFIX.test(prefix) ? { kind: "tag", prefix } : null;
  }
  if (text.startsWith(PARAM)) {
    const name = text.slice(PARAM.length);
    return name.trim() ? { kind: "param", name } : null;
  }
  if (KIND.test(text)) return null;
  const path = text.startsWith(CONFIG) ? text.slice(CONFIG.length) : text;
  return path !== "" && !path.split(".").includes("") ? { kind: "config", path } : null;
}

/** The key of a config path: bare where it reads back as that path (as URLs always had it). */
export function configKey(path: string): string {
  const key = parseGroupKey(path);
  return key?.kind === "config" && key.path === path ? path : `${CONFIG}${path}`;
}

export interface RunForGrouping {
  id: number;
  name?: string;
  config: unknown;
  tags?: readonly string[];
  params?: Readonly<Record<string, string>>;
}

/** Runs that cannot be split by a key: the message says why and what to do. */
export class GroupingError extends Error {}

/** The distinct values of a run's tags `<prefix>:<value>` / `<prefix>=<value>`, in order. */
function tagValues(tags: readonly string[] | undefined, prefix: string): string[] {
  const values: string[] = [];
  for (const tag of tags ?? []) {
    const separator = tag.charAt(prefix.length);
    if (tag.startsWith(prefix) && (separator === ":" || separator === "=")) {
      const value = tag.slice(prefix.length + 1);
      if (!values.includes(value)) values.push(value);
    }
  }
  return values;
}

/** A run's value of the key; undefined where it has none. GroupingError for two tags of the prefix. */
export function groupValue(run: RunForGrouping, key: GroupKey): unknown {
  if (key.kind === "config") return valueAt(run.config, key.path);
  if (key.kind === "param") return run.params?.[key.name];
  const values = tagValues(run.tags, key.prefix);
  if (values.length > 1) {
    const shown = values.map((value) => `${key.prefix}:${value}`).join(" and ");
    throw new GroupingError(
      `Run #${run.id}${run.name ? ` (${run.name})` : ""} has ${values.length} tags with prefix ${key.prefix}: ${shown}. ` +
        "A run must be in one group: keep one of those tags, or group by another key.",
    );
  }
  return values[0];
}

/** Runs that share one value of the grouping key. */
export interface ConfigGroup {
  /** Stable text of the value: equal values, equal ids. */
  id: string;
  /** "lr=1e-6": the config path's last segment (a tag's prefix, a param's name) and the value. */
  label: string;
  value: unknown;
  runIds: number[];
}

/** The last segment of a dotted path: "optim.lr" → "lr". */
export function shortPath(path: string): string {
  const dot = path.lastIndexOf(".");
  return dot >= 0 ? path.slice(dot + 1) : path;
}

/** A number where a tag's or param's text is one ("1e-05"), so that values sort as numbers. */
function sortable(value: unknown): unknown {
  if (typeof value !== "string" || value.trim() === "") return value;
  const number = Number(value);
  return Number.isFinite(number) ? number : value;
}

function compareValues(left: unknown, right: unknown): number {
  const a = sortable(left);
  const b = sortable(right);
  if (a === undefined || b === undefined) return a === b ? 0 : a === undefined ? 1 : -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (typeof a === "number") return -1;
  if (typeof b === "number") return 1;
  return formatConfigValue(a).localeCompare(formatConfigValue(b), undefined, { numeric: true });
}

function label(key: GroupKey, value: unknown): string {
  if (key.kind === "config") return `${shortPath(key.path)}=${formatConfigValue(value)}`;
  if (value === undefined) return "(none)";
  return `${key.kind === "tag" ? key.prefix : key.name}=${formatConfigValue(value)}`;
}

/**
 * Runs split by their value of the key `by` (objects and arrays compared by their stable text),
 * groups ordered by value (numbers, numeric text included, ascending; runs without one last),
 * runs kept in their order. GroupingError when `by` is no key, or a run has two tags of its prefix.
 */
export function groupRunsBy(runs: readonly RunForGrouping[], by: string): ConfigGroup[] {
  const key = parseGroupKey(by);
  if (!key) throw new GroupingError(`Cannot group by “${by}”: give ${GROUP_KEY_SYNTAX}.`);
  const groups = new Map<string, ConfigGroup>();
  for (const run of runs) {
    const value = groupValue(run, key);
    const id = value === undefined ? "\u0000unset" : stableStringify(value);
    const group = groups.get(id);
    if (group) group.runIds.push(run.id);
    else groups.set(id, { id, label: label(key, value), value, runIds: [run.id] });
  }
  return [...groups.values()].sort((a, b) => compareValues(a.value, b.value));
}

/** The runs' tags by prefix (up to the first `:` or `=`), a run's values joined. */
function tagMap(tags: readonly string[] | undefined): Map<string, string> {
  const map = new Map<string, string>();
  for (const tag of tags ?? []) {
    const at = tag.search(/[:=]/);
    if (at <= 0) continue;
    const prefix = tag.slice(0, at);
    if (!map.has(prefix)) map.set(prefix, tagValues(tags, prefix).join("\u0000"));
  }
  return map;
}

/** Tag prefixes whose values differ between the runs (absent counts), as keys: `tag:seed`. */
export function differingTagKeys(runs: readonly RunForGrouping[]): string[] {
  return differingNames(runs.map((run) => tagMap(run.tags))).map((prefix) => `${TAG}${prefix}`);
}

/** MLflow params whose values differ between the runs (absent counts), as keys: `param:trainer/lr`. */
export function differingParamKeys(runs: readonly RunForGrouping[]): string[] {
  return differingNames(runs.map((run) => new Map(Object.entries(run.params ?? {})))).map((name) => `${PARAM}${name}`);
}
