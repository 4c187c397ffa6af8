/** Which metric keys a comparison charts, and in what order. */
import { groupByNamespace } from "../run/charts";

/** Charts shown before anyone picks: enough for a first look, few enough to load at once. */
export const DEFAULT_KEY_LIMIT = 12;

/** Namespaces a comparison leads with: what the runs optimise, then how they evaluate. */
const LEADING = ["reward", "eval"];

/** Keys in the run page's namespace order (groupByNamespace), but with reward/ and eval/ first. */
export function orderKeys(keys: Iterable<string>): string[] {
  const rank = (namespace: string) => {
    const at = LEADING.indexOf(namespace);
    return at >= 0 ? at : LEADING.length;
  };
  return groupByNamespace(keys)
    .map((group, index) => ({ group, index }))
    .sort((a, b) => rank(a.group.namespace) - rank(b.group.namespace) || a.index - b.index)
    .flatMap(({ group }) => group.keys);
}

/** In how many runs each key appears. */
export function keyCounts(keysByRun: readonly (readonly string[])[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const keys of keysByRun) for (const key of new Set(keys)) counts.set(key, (counts.get(key) ?? 0) + 1);
  return counts;
}

/**
 * The keys every run has (reward/ and eval/ first), up to `limit`; when they share none, the
 * keys of any run, so that the page never opens on nothing.
 */
export function defaultKeys(keysByRun: readonly (readonly string[])[], limit: number = DEFAULT_KEY_LIMIT): string[] {
  const counts = keyCounts(keysByRun);
  const common = [...counts].filter(([, n]) => n === keysByRun.length).map(([key]) => key);
  return orderKeys(common.length > 0 ? common : counts.keys()).slice(0, limit);
}
