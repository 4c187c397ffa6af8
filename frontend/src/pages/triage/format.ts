/** Pure helpers of the triage pages: labels, the fix form's checks, the figures' geometry. */
import type { FailureStatus, FixedWeek, TriageFilters } from "./api";

/** What each infra cause means (controlplane/diagnostics/triage.py, CAUSES). */
export const CAUSE_LABELS: Record<string, string> = {
  lost_job: "job lost by Ray",
  dispatch: "not dispatched",
  oom: "out of memory",
  engine_crash: "engine crash",
  sandbox: "sandbox",
  killed: "driver killed",
  ray: "Ray error",
};

export function causeLabel(fault: string, cause: string): string {
  if (fault !== "infra") return "user code";
  return CAUSE_LABELS[cause] ?? (cause || "infra");
}

export function statusLabel(status: FailureStatus): string {
  return { open: "open", fixed: "fixed", regressed: "regressed" }[status];
}

/** The one-line title of a signature: its exception and message. */
export function signatureTitle(signature: { exception: string; message: string }): string {
  if (!signature.exception) return signature.message;
  return signature.message ? `${signature.exception}: ${signature.message}` : signature.exception;
}

export const MAX_NOTE = 2000;
const COMMIT = /^[0-9a-fA-F]{7,64}$/;

/** What is wrong with the fix form's fields (as the server would say), by field; {} when fine. */
export function fixProblems(note: string, commit: string): Record<string, string> {
  const problems: Record<string, string> = {};
  if (note.length > MAX_NOTE) problems.note = `at most ${MAX_NOTE} characters (got ${note.length})`;
  if (note.includes("\u0000")) problems.note = "must not contain NUL characters";
  const trimmed = commit.trim();
  if (trimmed && !COMMIT.test(trimmed)) problems.commit = "a commit hash: 7 to 64 hex digits";
  return problems;
}

export function filtersFrom(params: URLSearchParams): TriageFilters {
  const fault = params.get("fault");
  const fixed = params.get("fixed");
  return {
    fault: fault === "infra" || fault === "workload" ? fault : "",
    fixed: fixed === "true" || fixed === "false" ? fixed : "",
  };
}

/** Bars of a figure: each value's height in a `height` box, scaled to the largest (at least 1). */
export function barHeights(values: readonly number[], height: number): number[] {
  const top = Math.max(1, ...values);
  return values.map((v) => (v > 0 ? Math.max(1, (v / top) * height) : 0));
}

/** "Dec 1" for a week's Monday (an ISO date, read as UTC). */
export function weekLabel(isoDate: string): string {
  const date = new Date(`${isoDate}T00:00:00Z`);
  if (Number.isNaN(date.getTime())) return isoDate;
  return date.toLocaleDateString("en-US", { month: "short", day: "numeric", timeZone: "UTC" });
}

export function fixedTotal(weeks: readonly FixedWeek[]): number {
  return weeks.reduce((sum, week) => sum + week.fixed, 0);
}

/** The ISO date `days` after `isoDate` (a series' bucket), for a bar's title. */
export function addDays(isoDate: string, days: number): string {
  const date = new Date(`${isoDate}T00:00:00Z`);
  date.setUTCDate(date.getUTCDate() + days);
  return date.toISOString().slice(0, 10);
}
