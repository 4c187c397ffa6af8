import type { ApiErrorBody } from "./types";

/** Base of every REST call; the app is served by the same origin as the API. */
export const API_BASE = "/api/v1";

const UNSAFE_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** An error answer of the API, with the message a person can act on. */
export class ApiError extends Error {
  readonly status: number;
  /** The API's machine-readable code (`error`), or "http_<status>". */
  readonly code: string;
  /** Dotted field path → messages, for validation errors. */
  readonly fields: Record<string, string[]>;

  constructor(status: number, code: string, message: string, fields: Record<string, string[]> = {}) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.fields = fields;
  }

  /** The caller has no (valid) session: send them to the login page. */
  get isUnauthenticated(): boolean {
    // DRF answers 403 rather than 401 when session auth is the first
    // authenticator; its code tells "not logged in" from "not allowed".
    return this.status === 401 || (this.status === 403 && this.code === "not_authenticated");
  }
}

export function readCookie(name: string, cookieString: string = globalThis.document?.cookie ?? ""): string | null {
  for (const part of cookieString.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return null;
}

export type Query = Record<string, string | number | boolean | readonly (string | number)[] | null | undefined>;

/** `?a=1&keys=x,y`; null/undefined/"" are left out, arrays are comma-joined. */
export function buildQuery(query: Query | undefined): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined || value === null || value === "") continue;
    params.set(name, Array.isArray(value) ? value.join(",") : String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

/** Turn an error response into an ApiError, whatever its body looks like. */
export async function errorFromResponse(response: Response): Promise<ApiError> {
  let body: unknown = {};
  try {
    body = await response.json();
  } catch {
    // Not JSON (a proxy error page, say): fall back to the status line.
  }
  return errorFromBody(response.status, response.statusText, body);
}

/** The ApiError of an answer's status and parsed body (an XMLHttpRequest's too). */
export function errorFromBody(status: number, statusText: string, parsed: unknown): ApiError {
  const body = (parsed && typeof parsed === "object" ? parsed : {}) as Partial<ApiErrorBody> & { detail?: unknown };
  const message =
    (typeof body.message === "string" && body.message) ||
    (typeof body.detail === "string" && body.detail) ||
    `${status} ${statusText || "request failed"}`.trim();
  const code = typeof body.error === "string" ? body.error : `http_${status}`;
  const fields = body.fields && typeof body.fields === "object" ? body.fields : {};
  return new ApiError(status, code, message, fields);
}

let csrfPriming: Promise<void> | null = null;

/** GET /session sets the csrftoken cookie; do it once if an unsafe call finds none. */
export async function ensureCsrfCookie(): Promise<void> {
  if (readCookie("csrftoken")) return;
  csrfPriming ??= fetch(`${API_BASE}/session`, { credentials: "same-origin" })
    .then(() => undefined)
    .finally(() => {
      csrfPriming = null;
    });
  await csrfPriming;
}

export interface RequestOptions {
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  query?: Query;
  body?: unknown;
  signal?: AbortSignal;
}

/**
 * Call the API and return the parsed JSON (undefined for 204). Sends the
 * session cookie, and the CSRF header Django wants on unsafe methods.
 */
export async function apiRequest<T>(path: string, options: RequestOptions = {}): Promise<T> {
  const method = options.method ?? "GET";
  const headers: Record<string, string> = { Accept: "application/json" };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  if (UNSAFE_METHODS.has(method)) {
    await ensureCsrfCookie();
    const token = readCookie("csrftoken");
    if (token) headers["X-CSRFToken"] = token;
  }
  let response: Response;
  try {
    response = await fetch(`${API_BASE}${path}${buildQuery(options.query)}`, {
      method,
      headers,
      credentials: "same-origin",
      body: options.body === undefined ? null : JSON.stringify(options.body),
      signal: options.signal ?? null,
    });
  } catch (error) {
    if (error instanceof DOMException && error.name === "AbortError") throw error;
    throw new ApiError(0, "network_error", "Cannot reach the Barrel server. Check your connection and retry.");
  }
  if (!response.ok) throw await errorFromResponse(response);
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** Human text for any error a hook may surface. */
export function errorMessage(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}

/** The URL of a run's artifact file: for <img src>, download links and fetchText. */
export function artifactUrl(runId: number, path: string): string {
  return `${API_BASE}/runs/${runId}/artifacts/download${buildQuery({ path })}`;
}

/** A GET whose answer is text, not JSON (an artifact shown inline); errors as apiRequest's. */
export async function fetchText(url: string, signal?: AbortSignal): Promise<string> {
  let response: Response;
  try {
    response = await fetch(url, { credentials: "same-origin", signal: signal ?? null });
  } catch (error) {
    if (error instanceof DOMException && error.name === "AbortError") throw error;
    throw new ApiError(0, "network_error", "Cannot reach the Barrel server. Check your connection and retry.");
  }
  if (!response.ok) throw await errorFromResponse(response);
  return response.text();
}
