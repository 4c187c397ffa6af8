/**
 * Wire types of the Barrel v1 API. The REST shapes are aliases of the types generated from the
 * OpenAPI schema (schema.gen.ts: `make api-types` writes it, `make test` fails when it drifts);
 * the rest of the app imports only from here.
 *
 * Hand-written, because the schema has no counterpart:
 * - the websocket messages (Channels serves them; OpenAPI describes only REST), built from the
 *   generated RunSummary;
 * - runtime values the generator does not emit (RUN_STATUSES, isTerminal, WS_CLOSE_NOT_FOUND),
 *   each checked against a generated type at compile time.
 */
import type { components, operations } from "./schema.gen";

type Schemas = components["schemas"];

// ---------------------------------------------------------------- common

/** A float as it appears in an answer: a number, or a string for a non-finite one. */
export type WireFloat = Schemas["MetricKey"]["last_value"];
/** Non-finite floats travel as these strings in both directions. */
export type NonFiniteString = Exclude<WireFloat, number>;

/** `{"error": "<code>", "message": "human text", "fields": {"config.steps": [...]}}` */
export type ApiErrorBody = Schemas["Error"];

// ---------------------------------------------------------------- session, tokens

export type User = Schemas["User"];
/** GET/POST /api/v1/session */
export type SessionResponse = Schemas["Session"];
export type LoginRequest = Schemas["LoginRequest"];
export type TokenCreateRequest = Schemas["TokenCreateRequest"];
/** POST /api/v1/tokens → 201; `token` is shown once. */
export type TokenCreated = Schemas["TokenCreated"];
export type TokenInfo = Schemas["Token"];

// ---------------------------------------------------------------- teams, projects

export type TeamRole = Schemas["RoleEnum"];
export type TeamRef = Schemas["TeamRef"];
export type Team = Schemas["Team"];
export type Project = Schemas["Project"];

// ---------------------------------------------------------------- runs

export type RunStatus = Schemas["StatusEnum"];

/** Every status, in lifecycle order; the check below fails to compile if the schema's set changes. */
export const RUN_STATUSES = [
  "QUEUED",
  "DISPATCHING",
  "RUNNING",
  "CANCELLING",
  "SUCCEEDED",
  "FAILED",
  "CANCELLED",
] as const satisfies readonly RunStatus[];
type MissingStatus = Exclude<RunStatus, (typeof RUN_STATUSES)[number]>;
const everyStatusListed: [MissingStatus] extends [never] ? true : MissingStatus = true;
void everyStatusListed;

export const TERMINAL_STATUSES: ReadonlySet<string> = new Set<RunStatus>(["SUCCEEDED", "FAILED", "CANCELLED"]);

export function isTerminal(status: string): boolean {
  return TERMINAL_STATUSES.has(status);
}

export type RunSummary = Schemas["RunSummary"];
export type Attempt = Schemas["Attempt"];
/** A rollout sample a job kept (GET /runs/{id}/samples). */
export type Sample = Schemas["Sample"];
/** A checkpoint a job registered, with its human score and proxy reward (GET /runs/{id}/checkpoints). */
export type Checkpoint = Schemas["RunCheckpoint"];
/** A run's checkpoints as people ranked them, and the reward-hacking warning (GET /runs/{id}/human-eval). */
export type RunHumanEval = Schemas["RunHumanEval"];
export type CheckpointScore = Schemas["CheckpointScore"];
export type RunDetail = Schemas["RunDetail"];

/** One page of GET /api/v1/runs. */
export type RunPage = Schemas["PaginatedRunSummaryList"];
/** One page of GET /api/v1/runs/{id}/samples. */
export type SamplePage = Schemas["PaginatedSampleList"];

/** Query of GET /api/v1/runs. */
export type RunListParams = NonNullable<operations["runs_list"]["parameters"]["query"]>;

export type RunCreateRequest = Schemas["RunSubmitRequest"];

// ---------------------------------------------------------------- artifacts

/** One entry of GET /api/v1/runs/{id}/artifacts. */
export type ArtifactEntry = Schemas["ArtifactEntry"];
export type ArtifactList = Schemas["ArtifactList"];

// ---------------------------------------------------------------- metrics

export type MetricKeyInfo = Schemas["MetricKey"];
/** GET /api/v1/runs/{id}/metrics/keys */
export type MetricKeysResponse = Schemas["MetricKeys"];
/** Query of GET /api/v1/runs/{id}/metrics. */
export type MetricsQuery = NonNullable<operations["runs_metrics_retrieve"]["parameters"]["query"]>;
/** One downsampled series as column arrays; one entry per bucket. */
export type MetricSeriesWire = Schemas["MetricSeries"];
/** GET /api/v1/runs/{id}/metrics */
export type MetricsResponse = Schemas["MetricSeriesList"];

// ---------------------------------------------------------------- websocket

/**
 * Every event of a run carries `seq`, the run's event counter, and `epoch`,
 * the id of that counter; the snapshot carries both at connect. A jump in
 * `seq` means events were dropped on the way; a new `epoch` means the server's
 * counter started again (its Redis restarted): refetch, it is neither a gap
 * nor old news.
 */
interface WsEvent {
  seq?: number;
  epoch?: string;
}

export interface WsRunSnapshot extends WsEvent {
  type: "run.snapshot";
  run: RunSummary;
}

export interface WsRunStatus extends WsEvent {
  type: "run.status";
  run: RunSummary;
}

/** One key's new (or changed) points of an ingest batch, as columns. */
export interface LiveSeriesWire {
  key: string;
  steps: number[];
  values: WireFloat[];
  /** Each point's wall time, epoch seconds (as GET /runs/{id}/metrics?times=1 reads it back). */
  times?: number[];
}

export interface WsMetricsPoints extends WsEvent {
  type: "metrics.points";
  run_id: number;
  series: LiveSeriesWire[];
}

export interface WsResync {
  type: "resync";
  /** On a socket of several runs: the run to refetch; absent, refetch them all. */
  run_id?: number;
}

export interface WsSamplesAdded extends WsEvent {
  type: "samples.added";
  run_id: number;
  count: number;
  steps: number[];
}

export interface WsCheckpointRegistered extends WsEvent {
  type: "checkpoint.registered";
  run_id: number;
  checkpoint: Pick<Checkpoint, "id" | "step" | "uri">;
}

/** The run's diagnosis was updated (refetch GET /runs/{id}/diagnosis). */
export interface WsDiagnosisUpdated extends WsEvent {
  type: "diagnosis.updated";
  run_id: number;
  points_seen: number;
  last_step: number | null;
}

/** An alert was raised on the run (refetch GET /runs/{id}/alerts). */
export interface WsAlertRaised extends WsEvent {
  type: "alert.raised";
  run_id: number;
  alert: { id: number; kind: string; severity: string; message: string; first_step: number | null; last_step: number | null };
}

export type WsMessage =
  | WsRunSnapshot
  | WsRunStatus
  | WsMetricsPoints
  | WsResync
  | WsSamplesAdded
  | WsCheckpointRegistered
  | WsDiagnosisUpdated
  | WsAlertRaised;

/** Close code the server uses for "not found / not yours". */
export const WS_CLOSE_NOT_FOUND = 4404;

// ---------------------------------------------------------------- evals (blind checkpoint voting)

export type EvalStatus = Schemas["EvalStatusEnum"];
export type Eval = Schemas["Eval"];
export type EvalProgress = Schemas["Progress"];
/** One page of GET /api/v1/evals. */
export type EvalPage = Schemas["PaginatedEvalList"];
/** POST /api/v1/evals/{id}/battles/next → 200; no label of either side. */
export type Battle = Schemas["Battle"];
export type BattlePrompt = Schemas["BattlePrompt"];
export type VoteChoice = Schemas["ChoiceEnum"];
export type VoteRequest = Schemas["VoteInRequest"];
/** POST /api/v1/battles/{id}/votes → 201: the vote and who wrote which side. */
export type VoteResult = Schemas["VoteResult"];
export type Reveal = Schemas["Reveal"];
export type RevealSide = Schemas["Side"];
/** GET /api/v1/evals/{id}/ranking */
export type Ranking = Schemas["Ranking"];
export type RankingRow = Schemas["RankingRow"];

// ---------------------------------------------------------------- eval sets, new evals, published responses

/** One page of GET /api/v1/teams (each with the caller's role). */
export type TeamPage = Schemas["PaginatedTeamList"];
/** One page of GET /api/v1/projects. */
export type ProjectPage = Schemas["PaginatedProjectList"];
export type EvalSet = Schemas["EvalSet"];
/** GET /api/v1/eval-sets/{id}: the set with its prompts, in order. */
export type EvalSetDetail = Schemas["EvalSetDetail"];
export type EvalPrompt = Schemas["EvalPrompt"];
/** One page of GET /api/v1/eval-sets. */
export type EvalSetPage = Schemas["PaginatedEvalSetList"];
export type EvalSetCreateRequest = Schemas["EvalSetCreateRequest"];
export type EvalSetImportRequest = Schemas["EvalSetImportRequest"];
/** POST /api/v1/eval-sets/{id}/import → 200 */
export type EvalSetImported = Schemas["Imported"];
export type EvalCreateRequest = Schemas["EvalCreateRequest"];
export type ExternalCandidate = Schemas["ExternalCandidateRequest"];
/** One response of a CLOSED eval, with its candidate's label (GET /api/v1/evals/{id}/generations). */
export type Generation = Schemas["Generation"];
export type GenerationPage = Schemas["PaginatedGenerationList"];
/** Query of GET /api/v1/projects. */
export type ProjectListParams = NonNullable<operations["projects_list"]["parameters"]["query"]>;

/** The ranking with the voters' preference for longer responses taken out. */
export type LengthControlled = Schemas["LengthControlled"];

// ws /ws/evals/{id}/: whole-state events, no seq (a reconnect refetches over REST).

/** `ranking.updated` carries the ranking as every team member reads it: no flagged voters. */
export type PublicRanking = Omit<Ranking, "flagged_voters">;

export interface WsEvalState {
  type: "eval.snapshot" | "eval.status";
  eval_id: number;
  status: EvalStatus;
  failure_reason: string;
  closed_at: string | null;
  progress: EvalProgress;
}

export interface WsEvalProgress {
  type: "eval.progress";
  eval_id: number;
  progress: EvalProgress;
}

export interface WsRankingUpdated {
  type: "ranking.updated";
  eval_id: number;
  ranking: PublicRanking;
}

export type EvalWsMessage = WsEvalState | WsEvalProgress | WsRankingUpdated;

/** Close code for a caller that may not watch (a run's token): HTTP's 403. */
export const WS_CLOSE_FORBIDDEN = 4403;

// ---------------------------------------------------------------- run groups, comparison

/** GET /api/v1/groups (one page); a sweep's or a hand-made group of runs. */
export type RunGroup = Schemas["RunGroup"];
export type RunGroupPage = Schemas["PaginatedRunGroupList"];
/** GET /api/v1/groups/{id}: the group and its runs. */
export type RunGroupDetail = Schemas["RunGroupDetail"];
/** POST /api/v1/compare/stats */
export type CompareStatsRequest = Schemas["CompareStatsInRequest"];
export type CompareStats = Schemas["CompareStatsOut"];
export type CompareGroup = Schemas["GroupOut"];
export type Comparison = Schemas["ComparisonOut"];
export type CompareSummaryKind = Schemas["CompareSummaryEnum"];
