/**
 * Run configs as flat dotted paths: what differs between runs and the value of one path (the
 * runs split by it: grouping.ts). A config is any JSON value; objects nest, everything else (arrays
 * included) is a leaf.
 */

/** JSON with object keys sorted, so that equal values always read the same. */
export function stableStringify(value: unknown): string {
  if (value === undefined) return "undefined";
  if (value === null || typeof value !== "object") {
    if (typeof value === "number" && !Number.isFinite(value)) return String(value);
    return JSON.stringify(value) ?? String(value);
  }
  if (Array.isArray(value)) return `[${value.map(stableStringify).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableStringify(v)}`).join(",")}}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Every leaf of a config by dotted path ("optim.lr" → 1e-6). Arrays and empty objects are leaves;
 * a config that is not an object is one leaf at "".
 */
export function flattenConfig(config: unknown): Map<string, unknown> {
  const out = new Map<string, unknown>();
  const walk = (value: unknown, path: string) => {
    if (isPlainObject(value) && Object.keys(value).length > 0) {
      for (const [key, child] of Object.entries(value)) walk(child, path ? `${path}.${key}` : key);
    } else {
      out.set(path, value);
    }
  };
  if (config === undefined || config === null) return out;
  walk(config, "");
  return out;
}

/** The value at a dotted path (an object or array when the path names one); undefined when absent. */
export function valueAt(config: unknown, path: string): unknown {
  if (path === "") return config;
  let node: unknown = config;
  for (const part of path.split(".")) {
    if (!isPlainObject(node) || !(part in node)) return undefined;
    node = node[part];
  }
  return node;
}

/** Paths whose values are not the same in every config (absent counts as a value), sorted. */
export function differingPaths(configs: readonly unknown[]): string[] {
  return differingNames(configs.map(flattenConfig));
}

/** Names whose values are not the same in every map (absent counts as a value), sorted. */
export function differingNames(maps: readonly ReadonlyMap<string, unknown>[]): string[] {
  const names = new Set<string>();
  for (const map of maps) for (const name of map.keys()) names.add(name);
  const differing: string[] = [];
  for (const name of names) {
    const seen = new Set(maps.map((map) => (map.has(name) ? stableStringify(map.get(name)) : "\u0000absent")));
    if (seen.size > 1) differing.push(name);
  }
  return differing.sort((a, b) => a.localeCompare(b));
}

/** A config value as a person reads it: 1e-6, not 0.000001; strings bare; "(unset)" when absent. */
export function formatConfigValue(value: unknown): string {
  if (value === undefined) return "(unset)";
  if (typeof value === "number") {
    const abs = Math.abs(value);
    return value !== 0 && Number.isFinite(value) && (abs < 1e-3 || abs >= 1e6) ? value.toExponential() : String(value);
  }
  if (typeof value === "string") return value;
  return stableStringify(value);
}

export interface ConfigDiffRow {
  path: string;
  left: string;
  right: string;
}

/** The paths at which two configs differ, sorted, each side formatted. */
export function diffConfigs(left: unknown, right: unknown): ConfigDiffRow[] {
  const a = flattenConfig(left);
  const b = flattenConfig(right);
  return differingPaths([left, right]).map((path) => ({
    path,
    left: formatConfigValue(a.get(path)),
    right: formatConfigValue(b.get(path)),
  }));
}
