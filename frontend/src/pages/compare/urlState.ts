/**
 * What a compare view shows, kept in the URL so that a view can be shared:
 * `/compare?runs=1,2,3` (or `?group=7`) `&keys=reward/mean,eval/acc&by=optim.lr&band=stderr&smooth=0.6&log=1`
 * (`by=tag:seed` or `by=param:trainer/lr` group by a tag prefix or an MLflow param: grouping.ts).
 * Only what differs from the defaults is written.
 */

/** How a group's band is drawn: across-run min–max, or mean ± standard error. */
export type BandMode = "minmax" | "stderr";

export interface CompareState {
  /** Runs to compare, in order (a run keeps its colour by its place here). */
  runs: number[];
  /** A run group whose runs are compared; wins over `runs`. */
  group: number | null;
  /** Metric keys charted; null: the default (the keys all runs share). */
  keys: string[] | null;
  /** The grouping key the runs are grouped by (a config path, `tag:<prefix>`, `param:<name>`); "" for none. */
  by: string;
  band: BandMode;
  /** Debiased EMA weight, 0 (off) to 0.99. */
  smooth: number;
  log: boolean;
}

export const DEFAULT_STATE: CompareState = {
  runs: [],
  group: null,
  keys: null,
  by: "",
  band: "minmax",
  smooth: 0,
  log: false,
};

export const MAX_SMOOTHING = 0.99;

function positiveInt(text: string): number | null {
  if (!/^\d+$/.test(text.trim())) return null;
  const value = Number(text);
  return Number.isSafeInteger(value) && value > 0 ? value : null;
}

/** Comma-separated positive ids, each once, in order; anything else is dropped. */
export function parseIds(text: string | null): number[] {
  if (!text) return [];
  const ids: number[] = [];
  for (const part of text.split(",")) {
    const id = positiveInt(part);
    if (id !== null && !ids.includes(id)) ids.push(id);
  }
  return ids;
}

export function parseCompareState(params: URLSearchParams): CompareState {
  const rawKeys = params.get("keys");
  const keys = rawKeys === null || rawKeys.trim() === "" ? null : [...new Set(rawKeys.split(",").filter((k) => k !== ""))];
  const smooth = Number(params.get("smooth") ?? "0");
  const log = params.get("log");
  return {
    runs: parseIds(params.get("runs")),
    group: positiveInt(params.get("group") ?? ""),
    keys: keys && keys.length > 0 ? keys : null,
    by: (params.get("by") ?? "").trim(),
    band: params.get("band") === "stderr" ? "stderr" : "minmax",
    smooth: Number.isFinite(smooth) ? Math.min(Math.max(smooth, 0), MAX_SMOOTHING) : 0,
    log: log === "1" || log === "true",
  };
}

/** Encoded, but with "/" and ":" left readable: metric keys are full of slashes, grouping keys hold colons. */
function encodeList(values: readonly (string | number)[]): string {
  return values.map((v) => encodeURIComponent(String(v)).replace(/%2F/gi, "/").replace(/%3A/gi, ":")).join(",");
}

/** The query string (no "?") of a state; defaults are left out. */
export function compareSearch(state: CompareState): string {
  const parts: string[] = [];
  if (state.group !== null) parts.push(`group=${state.group}`);
  else if (state.runs.length > 0) parts.push(`runs=${encodeList(state.runs)}`);
  if (state.keys !== null && state.keys.length > 0) parts.push(`keys=${encodeList(state.keys)}`);
  if (state.by) parts.push(`by=${encodeList([state.by])}`);
  if (state.band !== DEFAULT_STATE.band) parts.push(`band=${state.band}`);
  if (state.smooth > 0) parts.push(`smooth=${Number(state.smooth.toFixed(2))}`);
  if (state.log) parts.push("log=1");
  return parts.join("&");
}

/** The compare page's URL for some runs, for links from other pages. */
export function compareRunsUrl(runIds: readonly number[]): string {
  return `/compare?${compareSearch({ ...DEFAULT_STATE, runs: [...runIds] })}`;
}
