import type { RunListParams } from "./types";

/**
 * Query keys in one place. Everything about one run sits under ["run", id] so
 * a websocket resync can invalidate exactly that run; lists sit under ["runs"].
 */
export const queryKeys = {
  session: ["session"] as const,
  runLists: ["runs"] as const,
  runList: (params: RunListParams) => ["runs", params] as const,
  run: (runId: number) => ["run", runId] as const,
  runDetail: (runId: number) => ["run", runId, "detail"] as const,
  metricKeys: (runId: number) => ["run", runId, "metric-keys"] as const,
  /** With `times`, the same series read with their wall times (a run page plotting against time). */
  metricSeries: (runId: number, times = false) =>
    times ? (["run", runId, "metric-series", "times"] as const) : (["run", runId, "metric-series"] as const),
  samples: (runId: number) => ["run", runId, "samples"] as const,
  checkpoints: (runId: number) => ["run", runId, "checkpoints"] as const,
  diagnosis: (runId: number) => ["run", runId, "diagnosis"] as const,
  humanEval: (runId: number) => ["run", runId, "human-eval"] as const,
  artifacts: (runId: number, path: string) => ["run", runId, "artifacts", path] as const,
  /** Keyed by size too: an artifact logged again under its path is fetched anew. */
  artifactText: (runId: number, path: string, size: number | null) =>
    ["run", runId, "artifact-text", path, size] as const,
  team: (teamId: number) => ["team", teamId] as const,
  evalLists: ["evals"] as const,
  /** Everything about one eval under ["eval", id], as for runs. */
  eval: (evalId: number) => ["eval", evalId] as const,
  evalDetail: (evalId: number) => ["eval", evalId, "detail"] as const,
  ranking: (evalId: number) => ["eval", evalId, "ranking"] as const,
  /** A CLOSED eval's published responses, one page at a time. */
  generations: (evalId: number, offset: number, limit: number) =>
    ["eval", evalId, "generations", offset, limit] as const,
  /** The caller's teams, each with the caller's role. */
  teams: ["teams"] as const,
  projects: (team: string) => ["projects", team] as const,
  evalSetLists: ["eval-sets"] as const,
  evalSet: (setId: number) => ["eval-set", setId] as const,
  groupLists: ["groups"] as const,
  group: (groupId: number) => ["group", groupId] as const,
};
