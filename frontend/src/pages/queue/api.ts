/**
 * The scheduler's queue: GET /queue (the caller's teams, or every team for a cluster admin),
 * optionally one team's. Kept beside the page (as alerts'): nothing else uses it.
 */
import { useQuery } from "@tanstack/react-query";

import { apiRequest } from "../../api/client";
import type { components } from "../../api/schema.gen";

export type Queue = components["schemas"]["Queue"];
export type QueuedRun = components["schemas"]["QueuedRun"];
export type AdmittedRun = components["schemas"]["AdmittedRun"];
export type TeamQueue = components["schemas"]["TeamQueue"];

/** Passes run every few seconds and estimates every 10 s: the page asks as often. */
export const QUEUE_REFETCH_MS = 3000;

export const queueKeys = {
  all: ["queue"] as const,
  team: (teamId: number | null) => ["queue", teamId ?? "all"] as const,
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
