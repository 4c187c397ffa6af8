/**
 * The submit page's API: recipes with their config schemas, the caller's projects, the run a
 * clone starts from, and the three ways to submit (a run, a clone, a sweep). Kept beside the page
 * rather than in api/hooks.ts: nothing else uses them.
 */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

import {
  API_BASE,
  ApiError,
  apiRequest,
  ensureCsrfCookie,
  errorFromBody,
  errorFromResponse,
  readCookie,
} from "../../api/client";
import { queryKeys } from "../../api/queryKeys";
import type { components } from "../../api/schema.gen";
import type { Json, JsonObject } from "./schemaForm";

type Schemas = components["schemas"];

export type Recipe = Schemas["Recipe"];
export type Project = Schemas["Project"];
export type ProjectPage = Schemas["PaginatedProjectList"];
export type RunDetail = Schemas["RunDetail"];
export type RunGroupDetail = Schemas["RunGroupDetail"];
export type RunCloneBody = Schemas["RunCloneRequest"];
export type WorkingDir = Schemas["WorkingDir"];

/** POST /runs. The generated RunSubmitRequest types `config` per recipe; the form builds it from
 * the schema GET /recipes serves, so here it is any JSON object. */
export interface RunSubmitBody {
  project: number | string;
  name: string;
  recipe: string;
  config: JsonObject;
  tags: string[];
}

/** POST /sweeps: a RunSubmitBody with the grid and a seed count (generated: SweepSubmitRequest). */
export interface SweepSubmitBody extends RunSubmitBody {
  grid: Record<string, Json[]>;
  seeds: number;
}

export const submitKeys = {
  recipes: ["recipes"] as const,
};

/** Enough for the project picker; a person has a handful of projects, not hundreds. */
const PROJECTS_LIMIT = 200;

export function useRecipes() {
  return useQuery({
    queryKey: submitKeys.recipes,
    queryFn: ({ signal }) => apiRequest<Recipe[]>("/recipes", { signal }),
    // The recipes are the server's code: they change with a deploy, not while a page is open.
    staleTime: 5 * 60_000,
  });
}

/** The projects of every team of the caller (the key of useProjects with no team). */
export function useAllProjects() {
  return useQuery({
    queryKey: queryKeys.projects(""),
    queryFn: ({ signal }) => apiRequest<ProjectPage>("/projects", { query: { limit: PROJECTS_LIMIT }, signal }),
    staleTime: 30_000,
  });
}

/** The run a clone starts from; nothing is asked without one. Shares the run page's cache entry. */
export function useSourceRun(runId: number | null) {
  return useQuery({
    queryKey: queryKeys.runDetail(runId ?? -1),
    queryFn: ({ signal }) => apiRequest<RunDetail>(`/runs/${runId ?? -1}`, { signal }),
    enabled: runId !== null,
  });
}

export function useSubmitRun() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: RunSubmitBody) => apiRequest<RunDetail>("/runs", { method: "POST", body }),
    onSuccess: (run) => {
      queryClient.setQueryData(queryKeys.runDetail(run.id), run);
      void queryClient.invalidateQueries({ queryKey: queryKeys.runLists });
      // "team/project" makes a project on first use.
      void queryClient.invalidateQueries({ queryKey: queryKeys.projects("") });
    },
  });
}

export function useCloneRun(sourceId: number) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: RunCloneBody) => apiRequest<RunDetail>(`/runs/${sourceId}/clone`, { method: "POST", body }),
    onSuccess: (run) => {
      queryClient.setQueryData(queryKeys.runDetail(run.id), run);
      void queryClient.invalidateQueries({ queryKey: queryKeys.runLists });
    },
  });
}

export interface SweepRequest {
  body: SweepSubmitBody;
  key: string;
}

export function useSubmitSweep() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ body, key }: SweepRequest) => postSweep(body, key),
    onSuccess: ({ group }) => {
      queryClient.setQueryData(queryKeys.group(group.id), group);
      void queryClient.invalidateQueries({ queryKey: queryKeys.runLists });
      void queryClient.invalidateQueries({ queryKey: queryKeys.groupLists });
      void queryClient.invalidateQueries({ queryKey: queryKeys.projects("") });
    },
  });
}

/**
 * POST /sweeps with its Idempotency-Key (apiRequest sends no headers of the caller's): 201 made
 * now, 200 when the key was seen (the first request's group). CSRF as apiRequest does it.
 */
export async function postSweep(body: SweepSubmitBody, key: string): Promise<{ group: RunGroupDetail; created: boolean }> {
  if (!readCookie("csrftoken")) {
    await fetch(`${API_BASE}/session`, { credentials: "same-origin" }).catch(() => undefined);
  }
  const headers: Record<string, string> = {
    Accept: "application/json",
    "Content-Type": "application/json",
    "Idempotency-Key": key,
  };
  const token = readCookie("csrftoken");
  if (token) headers["X-CSRFToken"] = token;
  let response: Response;
  try {
    response = await fetch(`${API_BASE}/sweeps`, {
      method: "POST",
      headers,
      credentials: "same-origin",
      body: JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, "network_error", "Cannot reach the Barrel server. Check your connection and retry.");
  }
  if (!response.ok) throw await errorFromResponse(response);
  return { group: (await response.json()) as RunGroupDetail, created: response.status === 201 };
}

/** A fresh Idempotency-Key. randomUUID exists only in secure contexts (https, localhost): a
 * dashboard served over plain http on a LAN name has getRandomValues alone. */
export function newIdempotencyKey(
  source: { randomUUID?: () => string; getRandomValues<T extends ArrayBufferView>(array: T): T } = globalThis.crypto,
): string {
  if (typeof source.randomUUID === "function") return source.randomUUID();
  const bytes = source.getRandomValues(new Uint8Array(16));
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x40; // version 4
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80; // RFC 4122 variant
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** One submission attempt: the body sent and the key it went with. */
export interface SweepAttempt {
  key: string;
  body: string;
}

/**
 * The key for sending `body`: the last attempt's when the body is the same (a retry after a
 * network error, whose request may have made the sweep: the server answers it with that group
 * instead of making another), a new one for a changed sweep.
 */
export function sweepAttempt(previous: SweepAttempt | null, body: string, make: () => string = newIdempotencyKey): SweepAttempt {
  return previous !== null && previous.body === body ? previous : { key: make(), body };
}

/** Whether a failed request may have reached the server, so that sending it again is a retry. */
export function mayRetry(error: unknown): boolean {
  return error instanceof ApiError && (error.status === 0 || error.status >= 500);
}

/** Where an upload is: bytes sent of the total. */
export interface UploadProgress {
  loaded: number;
  total: number;
}

/** The ApiError an XMLHttpRequest's answer carries. */
function xhrError(xhr: XMLHttpRequest): ApiError {
  let body: unknown = {};
  try {
    body = JSON.parse(xhr.responseText);
  } catch {
    // Not JSON (a proxy's page): the status line says it.
  }
  return errorFromBody(xhr.status, xhr.statusText, body);
}

/**
 * POST /teams/{id}/working-dirs with the zip as the body, its progress reported as it goes
 * (fetch cannot report an upload's progress: XMLHttpRequest can). 201 stored now, 200 when the
 * team had the same content; 413 over the server's limit, 400 when it is no zip.
 */
export async function uploadWorkingDir(
  teamId: number,
  file: Blob,
  onProgress: (progress: UploadProgress) => void,
  signal?: AbortSignal,
): Promise<WorkingDir> {
  await ensureCsrfCookie().catch(() => undefined);
  return new Promise<WorkingDir>((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", `${API_BASE}/teams/${teamId}/working-dirs`);
    xhr.withCredentials = true;
    xhr.setRequestHeader("Accept", "application/json");
    xhr.setRequestHeader("Content-Type", "application/octet-stream"); // as the API documents it
    const token = readCookie("csrftoken");
    if (token) xhr.setRequestHeader("X-CSRFToken", token);
    xhr.upload.onprogress = (event) => onProgress({ loaded: event.loaded, total: event.lengthComputable ? event.total : file.size });
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        try {
          resolve(JSON.parse(xhr.responseText) as WorkingDir);
        } catch {
          reject(new ApiError(xhr.status, "bad_answer", "The server's answer to the upload is not JSON."));
        }
      } else reject(xhrError(xhr));
    };
    xhr.onerror = () =>
      reject(new ApiError(0, "network_error", "The upload was cut off before the server answered: check your connection and retry."));
    xhr.onabort = () => reject(new DOMException("The upload was cancelled.", "AbortError"));
    signal?.addEventListener("abort", () => xhr.abort(), { once: true });
    xhr.send(file);
  });
}
