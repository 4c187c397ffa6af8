/**
 * One TanStack Query hook per API operation. Mutations update or invalidate
 * exactly the queries they affect; live websocket messages patch the same
 * cache entries (see pages/run/live.ts).
 */
import {
  keepPreviousData,
  queryOptions,
  useMutation,
  useQuery,
  useQueryClient,
  type QueryClient,
} from "@tanstack/react-query";

import { apiRequest, artifactUrl, fetchText } from "./client";
import { applyLatePoints, chunkKeys, emptySeries, liveBufferFor, seriesFromWire, type SeriesByKey } from "./metrics";
import { queryKeys } from "./queryKeys";
import {
  isTerminal,
  type ArtifactList,
  type LoginRequest,
  type MetricKeysResponse,
  type MetricsResponse,
  type RunDetail,
  type RunHumanEval,
  type RunListParams,
  type RunPage,
  type SamplePage,
  type Checkpoint,
  type SessionResponse,
  type Battle,
  type Eval,
  type EvalPage,
  type Ranking,
  type Team,
  type VoteRequest,
  type VoteResult,
  type EvalCreateRequest,
  type EvalSetCreateRequest,
  type EvalSetDetail,
  type EvalSetImported,
  type EvalSetImportRequest,
  type EvalSetPage,
  type GenerationPage,
  type ProjectPage,
  type TeamPage,
  type CompareStats,
  type CompareStatsRequest,
  type RunGroupDetail,
  type RunGroupPage,
} from "./types";

/** Server-side downsampling bound per series. */
export const MAX_POINTS = 1000;
/** The runs table polls; a few seconds keeps statuses live without websockets per row. */
export const RUNS_REFETCH_MS = 2000;

// ---------------------------------------------------------------- session

export function useSession() {
  return useQuery({
    queryKey: queryKeys.session,
    // Also sets the csrftoken cookie that unsafe calls need.
    queryFn: ({ signal }) => apiRequest<SessionResponse>("/session", { signal }),
    staleTime: 60_000,
  });
}

export function useLogin() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (credentials: LoginRequest) =>
      apiRequest<SessionResponse>("/session", { method: "POST", body: credentials }),
    onSuccess: (session) => {
      // Data cached under a previous user must not leak into this one.
      queryClient.removeQueries({ predicate: (q) => q.queryKey[0] !== "session" });
      queryClient.setQueryData(queryKeys.session, session);
    },
  });
}

export function useLogout() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: () => apiRequest<void>("/session", { method: "DELETE" }),
    onSettled: () => {
      queryClient.removeQueries({ predicate: (q) => q.queryKey[0] !== "session" });
      queryClient.setQueryData<SessionResponse>(queryKeys.session, { user: null });
    },
  });
}

// ---------------------------------------------------------------- runs

export function useRuns(params: RunListParams) {
  return useQuery({
    queryKey: queryKeys.runList(params),
    queryFn: ({ signal }) =>
      apiRequest<RunPage>("/runs", { query: { ...params }, signal }),
    placeholderData: keepPreviousData,
    refetchInterval: RUNS_REFETCH_MS,
  });
}

export function useRun(runId: number) {
  return useQuery({
    queryKey: queryKeys.runDetail(runId),
    queryFn: ({ signal }) => apiRequest<RunDetail>(`/runs/${runId}`, { signal }),
    // The websocket pushes status changes; this slow poll only covers a
    // socket that is down.
    refetchInterval: (query) => {
      const status = query.state.data?.status;
      return status && isTerminal(status) ? false : 10_000;
    },
  });
}

export function useCancelRun(runId: number) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: () => apiRequest<RunDetail>(`/runs/${runId}/cancel`, { method: "POST" }),
    onSuccess: (run) => {
      queryClient.setQueryData(queryKeys.runDetail(runId), run);
      void queryClient.invalidateQueries({ queryKey: queryKeys.runLists });
    },
  });
}

/** A new attempt from a checkpoint (the latest when none is named). */
export function useResumeRun(runId: number) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (checkpoint?: number) =>
      apiRequest<RunDetail>(`/runs/${runId}/resume`, {
        method: "POST",
        body: checkpoint === undefined ? {} : { checkpoint },
      }),
    onSuccess: (run) => {
      queryClient.setQueryData(queryKeys.runDetail(runId), run);
      void queryClient.invalidateQueries({ queryKey: queryKeys.runLists });
    },
  });
}

// ---------------------------------------------------------------- samples and checkpoints

/** Samples shown on the run page: the newest ones (the job keeps a few per step). */
export const SAMPLES_SHOWN = 40;

export function useSamples(runId: number) {
  return useQuery({
    queryKey: queryKeys.samples(runId),
    queryFn: ({ signal }) =>
      apiRequest<SamplePage>(`/runs/${runId}/samples`, { query: { limit: SAMPLES_SHOWN }, signal }),
    // "samples.added" events invalidate this entry.
    staleTime: Number.POSITIVE_INFINITY,
  });
}

export function useCheckpoints(runId: number) {
  return useQuery({
    queryKey: queryKeys.checkpoints(runId),
    queryFn: ({ signal }) => apiRequest<Checkpoint[]>(`/runs/${runId}/checkpoints`, { signal }),
    // "checkpoint.registered" events invalidate this entry.
    staleTime: Number.POSITIVE_INFINITY,
  });
}

/** How often a run page asks again for its human scores while the eval behind them is open:
 * votes move them, and no event announces a vote to the run's page. */
export const HUMAN_EVAL_REFETCH_MS = 30_000;

export function useRunHumanEval(runId: number) {
  return useQuery({
    queryKey: queryKeys.humanEval(runId),
    queryFn: ({ signal }) => apiRequest<RunHumanEval>(`/runs/${runId}/human-eval`, { signal }),
    refetchInterval: (query) => (query.state.data?.eval?.status === "OPEN" ? HUMAN_EVAL_REFETCH_MS : false),
  });
}

// ---------------------------------------------------------------- artifacts

/** One directory of a run's artifacts. No event announces a new artifact: a short staleness,
 * and a refetch when the window regains focus, keep it fresh enough. */
export function useArtifacts(runId: number, path: string) {
  return useQuery({
    queryKey: queryKeys.artifacts(runId, path),
    queryFn: ({ signal }) => apiRequest<ArtifactList>(`/runs/${runId}/artifacts`, { query: { path }, signal }),
    staleTime: 15_000,
    placeholderData: keepPreviousData,
  });
}

/** A text or JSON artifact's content, for showing it inline. */
export function useArtifactText(runId: number, path: string, size: number | null, enabled: boolean) {
  return useQuery({
    queryKey: queryKeys.artifactText(runId, path, size),
    queryFn: ({ signal }) => fetchText(artifactUrl(runId, path), signal),
    staleTime: Number.POSITIVE_INFINITY,
    enabled,
  });
}

// ---------------------------------------------------------------- metrics

export function metricKeysOptions(runId: number) {
  return queryOptions({
    queryKey: queryKeys.metricKeys(runId),
    queryFn: ({ signal }) => apiRequest<MetricKeysResponse>(`/runs/${runId}/metrics/keys`, { signal }),
    // Kept current by the websocket; refetched on resync.
    staleTime: Number.POSITIVE_INFINITY,
  });
}

export function useMetricKeys(runId: number) {
  return useQuery(metricKeysOptions(runId));
}

/** Keys first, then their downsampled series, in as few requests as the URL length allows. */
export async function fetchRunSeries(
  queryClient: QueryClient,
  runId: number,
  signal?: AbortSignal,
  times = false,
): Promise<SeriesByKey> {
  const startedAt = performance.now();
  // staleTime 1 s: reuse keys that the page just fetched, but refetch after a resync.
  const { keys } = await queryClient.fetchQuery({ ...metricKeysOptions(runId), staleTime: 1000 });
  const names = keys.map((k) => k.key);
  const responses = await Promise.all(
    chunkKeys(names).map((chunk) =>
      apiRequest<MetricsResponse>(`/runs/${runId}/metrics`, {
        query: { keys: chunk, max_points: MAX_POINTS, ...(times ? { times: 1 } : {}) },
        signal,
      }),
    ),
  );
  const fetched: SeriesByKey = {};
  for (const name of names) fetched[name] = emptySeries(name);
  for (const response of responses) {
    for (const wire of response.series) fetched[wire.key] = seriesFromWire(wire);
  }
  // Points pushed while these requests were in flight may be missing from them.
  return applyLatePoints(fetched, liveBufferFor(runId).since(startedAt));
}

/** A run's series; with `times`, each with its wall times too (a separate cache entry, patched live alike). */
export function useMetricSeries(runId: number, times = false) {
  const queryClient = useQueryClient();
  return useQuery({
    queryKey: queryKeys.metricSeries(runId, times),
    queryFn: ({ signal }) => fetchRunSeries(queryClient, runId, signal, times),
    // Live points patch this entry; a resync invalidates it.
    staleTime: Number.POSITIVE_INFINITY,
  });
}

// ---------------------------------------------------------------- evals (blind voting)

/** An eval's page polls this often while its responses are being generated. */
export const EVAL_GENERATING_REFETCH_MS = 3000;
/** The ranking of an open eval moves as votes arrive. */
export const RANKING_REFETCH_MS = 5000;

export function useEvals() {
  return useQuery({
    queryKey: queryKeys.evalLists,
    queryFn: ({ signal }) => apiRequest<EvalPage>("/evals", { query: { limit: 100 }, signal }),
    refetchInterval: RUNS_REFETCH_MS * 5,
  });
}

/**
 * An eval. `poll`: refetch while it changes (GENERATING, OPEN); the eval page turns it off
 * while its websocket is live, since the socket's messages patch this entry.
 */
export function useEval(evalId: number, { poll = true }: { poll?: boolean } = {}) {
  return useQuery({
    queryKey: queryKeys.evalDetail(evalId),
    queryFn: ({ signal }) => apiRequest<Eval>(`/evals/${evalId}`, { signal }),
    refetchInterval: (query) => {
      if (!poll) return false;
      const status = query.state.data?.status;
      if (status === "GENERATING") return EVAL_GENERATING_REFETCH_MS;
      return status === "OPEN" ? RANKING_REFETCH_MS : false;
    },
  });
}

/** The ranking; `poll`: refetch as votes arrive (off while the eval's websocket pushes it). */
export function useRanking(evalId: number, enabled: boolean, poll: boolean) {
  return useQuery({
    queryKey: queryKeys.ranking(evalId),
    queryFn: ({ signal }) => apiRequest<Ranking>(`/evals/${evalId}/ranking`, { signal }),
    enabled,
    refetchInterval: poll ? RANKING_REFETCH_MS : false,
  });
}

/** A team with the caller's role in it (null role: not a member). */
export function useTeam(teamId: number | undefined) {
  return useQuery({
    queryKey: queryKeys.team(teamId ?? -1),
    queryFn: ({ signal }) => apiRequest<Team>(`/teams/${teamId}`, { signal }),
    enabled: teamId !== undefined,
    staleTime: 60_000,
  });
}

export function useCloseEval(evalId: number) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: () => apiRequest<Eval>(`/evals/${evalId}/close`, { method: "POST" }),
    onSuccess: (closed) => {
      queryClient.setQueryData(queryKeys.evalDetail(evalId), closed);
      void queryClient.invalidateQueries({ queryKey: queryKeys.ranking(evalId) });
      void queryClient.invalidateQueries({ queryKey: queryKeys.evalLists });
    },
  });
}

/**
 * The next battle for the caller; undefined (a 204) when none is left. A mutation, not a query:
 * each call is served a new battle, and nothing may cache one across voters or reloads.
 */
export function useNextBattle(evalId: number) {
  return useMutation({
    mutationFn: () => apiRequest<Battle | undefined>(`/evals/${evalId}/battles/next`, { method: "POST" }),
  });
}

export function useVote(evalId: number) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ battle, vote }: { battle: string; vote: VoteRequest }) =>
      apiRequest<VoteResult>(`/battles/${battle}/votes`, { method: "POST", body: vote }),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: queryKeys.eval(evalId) });
    },
  });
}

// ---------------------------------------------------------------- eval sets, new evals, published responses

/** Enough for a form's pickers; a team has a handful of teams and projects, not hundreds. */
export const PICKER_LIMIT = 200;

export function useTeams() {
  return useQuery({
    queryKey: queryKeys.teams,
    queryFn: ({ signal }) => apiRequest<TeamPage>("/teams", { query: { limit: PICKER_LIMIT }, signal }),
    staleTime: 60_000,
  });
}

/** The projects of one team (by slug); nothing is asked before a team is chosen. */
export function useProjects(team: string | undefined) {
  return useQuery({
    queryKey: queryKeys.projects(team ?? ""),
    queryFn: ({ signal }) =>
      apiRequest<ProjectPage>("/projects", { query: { team, limit: PICKER_LIMIT }, signal }),
    enabled: Boolean(team),
    staleTime: 30_000,
  });
}

export function useEvalSets() {
  return useQuery({
    queryKey: queryKeys.evalSetLists,
    queryFn: ({ signal }) => apiRequest<EvalSetPage>("/eval-sets", { query: { limit: PICKER_LIMIT }, signal }),
  });
}

export function useEvalSet(setId: number | undefined) {
  return useQuery({
    queryKey: queryKeys.evalSet(setId ?? -1),
    queryFn: ({ signal }) => apiRequest<EvalSetDetail>(`/eval-sets/${setId}`, { signal }),
    enabled: setId !== undefined,
  });
}

/** A new set, with its prompts in the same request: a bad line refuses the whole set (one transaction). */
export function useCreateEvalSet() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: EvalSetCreateRequest) =>
      apiRequest<EvalSetDetail>("/eval-sets", { method: "POST", body }),
    onSuccess: (created) => {
      queryClient.setQueryData(queryKeys.evalSet(created.id), created);
      void queryClient.invalidateQueries({ queryKey: queryKeys.evalSetLists });
    },
  });
}

/** Append prompts to a set: all of the lines, or none when one is bad. */
export function useImportEvalSet(setId: number) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: EvalSetImportRequest) =>
      apiRequest<EvalSetImported>(`/eval-sets/${setId}/import`, { method: "POST", body }),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: queryKeys.evalSet(setId) });
      void queryClient.invalidateQueries({ queryKey: queryKeys.evalSetLists });
    },
  });
}

export function useCreateEval() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: EvalCreateRequest) => apiRequest<Eval>("/evals", { method: "POST", body }),
    onSuccess: (created) => {
      queryClient.setQueryData(queryKeys.evalDetail(created.id), created);
      void queryClient.invalidateQueries({ queryKey: queryKeys.evalLists });
    },
  });
}

/**
 * One page of a CLOSED eval's responses with their candidates. Never asked while the eval is
 * open (`enabled`): the server would answer 409, and the page must not even try to name models.
 */
export function useGenerations(evalId: number, offset: number, limit: number, enabled: boolean) {
  return useQuery({
    queryKey: queryKeys.generations(evalId, offset, limit),
    queryFn: ({ signal }) =>
      apiRequest<GenerationPage>(`/evals/${evalId}/generations`, { query: { offset, limit }, signal }),
    enabled,
    placeholderData: keepPreviousData,
    // A closed eval's responses never change.
    staleTime: Number.POSITIVE_INFINITY,
  });
}

// ---------------------------------------------------------------- run groups, comparison

export function useGroups() {
  return useQuery({
    queryKey: queryKeys.groupLists,
    queryFn: ({ signal }) => apiRequest<RunGroupPage>("/groups", { query: { limit: PICKER_LIMIT }, signal }),
  });
}

export function useGroup(groupId: number) {
  return useQuery({
    queryKey: queryKeys.group(groupId),
    queryFn: ({ signal }) => apiRequest<RunGroupDetail>(`/groups/${groupId}`, { signal }),
    // Its runs' statuses move while they run.
    refetchInterval: (query) =>
      query.state.data?.runs.some((run) => !isTerminal(run.status)) ? RUNS_REFETCH_MS : false,
  });
}

/** The statistics of groups of runs: asked on demand (a button), so a mutation. */
export function useCompareStats() {
  return useMutation({
    mutationFn: (body: CompareStatsRequest) =>
      apiRequest<CompareStats>("/compare/stats", { method: "POST", body }),
  });
}
