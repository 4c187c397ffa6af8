/**
 * The scheduler's queue: GET /queue (the caller's teams, or every team for a cluster admin),
 * optionally one team's; and a team's audit, GET /teams/{id}/admissions and /preemptions.
 * Kept beside the page (as alerts'): nothing else uses it.
 */
import { useInfiniteQuery, useQuery } from "@tanstack/react-query";

import { apiRequest } from "../../api/client";
import type { components } from "../../api/schema.gen";

export type Queue = components["schemas"]["Queue"];
export type QueuedRun = components["schemas"]["QueuedRun"];
export type AdmittedRun = components["schemas"]["AdmittedRun"];
export type TeamQueue = components["schemas"]["TeamQueue"];
export type Admission = components["schemas"]["Admission"];
export type Preemption = components["schemas"]["Preemption"];

/** Passes run every few seconds and estimates every 10 s: the page asks as often. */
export const QUEUE_REFETCH_MS = 3000;

export const queueKeys = {
  all: ["queue"] as const,
  team: (teamId: number | null) => ["queue", teamId ?? "all"] as const,
  audit: (kind: AuditKind, teamId: number) => ["queue", teamId, "audit", kind] as const,
};

/** The queue, asked again every few seconds while the page is open; null: every team the caller sees. */
export function useQueue(teamId: number | null) {
  return useQuery({
    queryKey: queueKeys.team(teamId),
    queryFn: ({ signal }) => apiRequest<Queue>("/queue", { query: teamId === null ? {} : { team: teamId }, signal }),
    // The previous answer stays while the next loads, but never another team's.
    placeholderData: (previous, query) => (query?.queryKey[1] === (teamId ?? "all") ? previous : undefined),
    refetchInterval: QUEUE_REFETCH_MS,
  });
}

/** The audit's lists: what the scheduler admitted, and what it asked to make room. */
export type AuditKind = "admissions" | "preemptions";
type AuditRow<K extends AuditKind> = K extends "admissions" ? Admission : Preemption;
type AuditPage<K extends AuditKind> = K extends "admissions"
  ? components["schemas"]["PaginatedAdmissionList"]
  : components["schemas"]["PaginatedPreemptionList"];

/** Rows per "Show more": a screenful, not the API's default of 50. */
export const AUDIT_PAGE_SIZE = 20;

/**
 * A team's admissions or preemptions, newest first, a page (limit/offset) at a time.
 *
 * Only the first page is asked again with the queue: once older pages show, refreshing would
 * ask for every one of them every few seconds (and move the rows being read), so the list
 * then waits for `refetch` (a "Refresh" button). A row that arrives between two pages shifts
 * the next page by one: the pages overlap, never skip, and `rows` drops the repeats.
 */
export function useAudit<K extends AuditKind>(kind: K, teamId: number) {
  const query = useInfiniteQuery({
    queryKey: queueKeys.audit(kind, teamId),
    queryFn: ({ pageParam, signal }) =>
      apiRequest<AuditPage<K>>(`/teams/${teamId}/${kind}`, { query: { limit: AUDIT_PAGE_SIZE, offset: pageParam }, signal }),
    initialPageParam: 0,
    getNextPageParam: (last, _pages, offset) => (last.next ? offset + AUDIT_PAGE_SIZE : undefined),
    refetchInterval: (q) => ((q.state.data?.pages.length ?? 0) > 1 ? false : QUEUE_REFETCH_MS),
  });
  const pages = query.data?.pages ?? [];
  return {
    query,
    rows: distinctById(pages.flatMap((page) => page.results as AuditRow<K>[])),
    /** The server's count at the latest page asked for; null before the first. */
    count: pages.at(-1)?.count ?? null,
    /** Older pages show: the list is not refreshed on its own. */
    paused: pages.length > 1,
  };
}

export type AuditList<K extends AuditKind> = ReturnType<typeof useAudit<K>>;

/** The first of each id, in order. */
export function distinctById<T extends { id: number }>(rows: T[]): T[] {
  const seen = new Set<number>();
  return rows.filter((row) => {
    if (seen.has(row.id)) return false;
    seen.add(row.id);
    return true;
  });
}
