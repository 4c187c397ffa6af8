/**
 * Wire types of the Barrel v1 API, written by hand from the contract while the
 * backend is in flight. Field names match the JSON exactly.
 *
 * When the OpenAPI schema exists, run `npm run gen:types` (writes
 * schema.gen.ts) and turn the interfaces below into aliases of
 * `components["schemas"][...]`; the rest of the app imports only from here.
 */

// ---------------------------------------------------------------- common

/** Non-finite floats travel as these strings in both directions. */
export type NonFiniteString = "NaN" | "Infinity" | "-Infinity";
/** A float as it appears on the wire. */
export type WireFloat = number | NonFiniteString;

/** `{"error": "<code>", "message": "human text", "fields": {"config.steps": [...]}}` */
export interface ApiErrorBody {
  error: string;
  message: string;
  /** Only for validation errors; keys are dotted paths. */
  fields?: Record<string, string[]>;
}

export interface Paginated<T> {
  count: number;
  next: string | null;
  previous: string | null;
  results: T[];
}

// ---------------------------------------------------------------- session, tokens

export interface User {
  id: number;
  username: string;
}

/** GET/POST /api/v1/session */
export interface SessionResponse {
  user: User | null;
}

export interface LoginRequest {
  username: string;
  password: string;
}

export interface TokenCreateRequest {
  username?: string;
  password?: string;
  name?: string;
}

/** POST /api/v1/tokens → 201; `token` is shown once. */
export interface TokenCreated {
  id: number;
  name: string;
  token: string;
  created_at: string;
}

export interface TokenInfo {
  id: number;
  name: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

// ---------------------------------------------------------------- teams, projects

export type TeamRole = "viewer" | "member" | "admin";

export interface TeamRef {
  id: number;
  slug: string;
  name: string;
}

export interface Team extends TeamRef {
  role: TeamRole;
}

export interface ProjectRef {
  id: number;
  name: string;
  team: TeamRef;
}

export interface Project extends ProjectRef {
  created_at: string;
}

// ---------------------------------------------------------------- runs

export const RUN_STATUSES = [
  "QUEUED",
  "DISPATCHING",
  "RUNNING",
  "CANCELLING",
  "SUCCEEDED",
  "FAILED",
  "CANCELLED",
] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export const TERMINAL_STATUSES: ReadonlySet<string> = new Set<RunStatus>([
  "SUCCEEDED",
  "FAILED",
  "CANCELLED",
]);

export function isTerminal(status: string): boolean {
  return TERMINAL_STATUSES.has(status);
}

export interface RunSummary {
  id: number;
  name: string;
  recipe: string;
  status: RunStatus;
  tags: string[];
  project: ProjectRef;
  created_by: string;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** Empty string unless the run failed. */
  failure_reason: string;
}

export interface Attempt {
  /** uuid; also the Ray submission_id. */
  id: string;
  number: number;
  /** The contract does not fix an attempt status set; shown as given. */
  status: string;
  created_at: string;
  submitted_at: string | null;
  started_at: string | null;
  finished_at: string | null;
  failure_reason: string;
  // The environment fields arrive when the job reports in, so they may be
  // empty (or null) before that.
  code_version: string | null;
  packages: Record<string, string> | null;
  seeds: Record<string, unknown> | null;
  python: string | null;
  hostname: string | null;
  /** Checkpoint id this attempt resumed from (POST /runs/{id}/resume), else null. */
  resume_from: number | null;
}

/** A rollout sample a job kept (GET /runs/{id}/samples). */
export interface Sample {
  id: number;
  step: number;
  prompt: string;
  response: string;
  /** A number, or "NaN"/"Infinity" strings; null when the job sent none. */
  reward: number | string | null;
  prompt_tokens: number | null;
  response_tokens: number | null;
  weight_version: number | null;
  extra: Record<string, unknown>;
  created_at: string;
}

/** A checkpoint a job registered (GET /runs/{id}/checkpoints). */
export interface Checkpoint {
  id: number;
  run: number;
  attempt: string | null;
  step: number;
  uri: string;
  weight_version: number | null;
  metrics: Record<string, number | string>;
  created_at: string;
}

export interface RunDetail extends RunSummary {
  config: Record<string, unknown>;
  /** Params logged through the MLflow API, by key: an external run's whole configuration. */
  params: Record<string, string>;
  log_tail: string;
  attempts: Attempt[];
}

/** Query of GET /api/v1/runs. */
export interface RunListParams {
  status?: RunStatus;
  team?: string;
  project?: number;
  name?: string;
  tag?: string;
  limit?: number;
  offset?: number;
}

export interface RunCreateRequest {
  project: string | number;
  name: string;
  recipe: string;
  config: Record<string, unknown>;
  tags?: string[];
}

// ---------------------------------------------------------------- artifacts

/** One entry of GET /api/v1/runs/{id}/artifacts. */
export interface ArtifactEntry {
  /** Relative to the run's artifact root; pass it back as `path`. */
  path: string;
  name: string;
  is_dir: boolean;
  /** Bytes; null for a directory. */
  size: number | null;
}

export interface ArtifactList {
  /** The directory listed; "" for the root. */
  path: string;
  files: ArtifactEntry[];
  /** The directory has more entries than one answer lists. */
  truncated: boolean;
}

// ---------------------------------------------------------------- metrics

export interface MetricKeyInfo {
  key: string;
  count: number;
  first_step: number;
  last_step: number;
  last_value: WireFloat | null;
}

/** GET /api/v1/runs/{id}/metrics/keys */
export interface MetricKeysResponse {
  keys: MetricKeyInfo[];
}

/** Query of GET /api/v1/runs/{id}/metrics. */
export interface MetricsQuery {
  keys?: string[];
  max_points?: number;
  start?: number;
  end?: number;
}

/** One downsampled series as column arrays; one entry per bucket. */
export interface MetricSeriesWire {
  key: string;
  /** Raw points in the requested range (not the number of buckets). */
  count: number;
  /** Last step of each bucket. */
  step: number[];
  min: WireFloat[];
  max: WireFloat[];
  mean: WireFloat[];
  last: WireFloat[];
}

/** GET /api/v1/runs/{id}/metrics */
export interface MetricsResponse {
  run: number;
  series: MetricSeriesWire[];
}

// ---------------------------------------------------------------- websocket

/**
 * Every event of a run carries `seq`, the run's event counter; the snapshot
 * carries the counter at connect. A jump means events were dropped on the way.
 */
export interface WsRunSnapshot {
  type: "run.snapshot";
  run: RunSummary;
  seq?: number;
}

export interface WsRunStatus {
  type: "run.status";
  run: RunSummary;
  seq?: number;
}

/** One key's new (or changed) points of an ingest batch, as columns. */
export interface LiveSeriesWire {
  key: string;
  steps: number[];
  values: WireFloat[];
}

export interface WsMetricsPoints {
  type: "metrics.points";
  run_id: number;
  series: LiveSeriesWire[];
  seq?: number;
}

export interface WsResync {
  type: "resync";
}

export interface WsSamplesAdded {
  type: "samples.added";
  run_id: number;
  count: number;
  steps: number[];
  seq?: number;
}

export interface WsCheckpointRegistered {
  type: "checkpoint.registered";
  run_id: number;
  checkpoint: { id: number; step: number; uri: string };
  seq?: number;
}

export type WsMessage =
  | WsRunSnapshot
  | WsRunStatus
  | WsMetricsPoints
  | WsResync
  | WsSamplesAdded
  | WsCheckpointRegistered;

/** Close code the server uses for "not found / not yours". */
export const WS_CLOSE_NOT_FOUND = 4404;
