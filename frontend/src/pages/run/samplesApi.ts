/**
 * The sample browser's queries. The plain newest page stays api/hooks' `useSamples` (the entry
 * `samples.added` refreshes, see live.ts); every other view sits under the same run's
 * ["run", id, "samples", ...] so that a websocket resync of the run refetches it too.
 */
import { keepPreviousData, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useRef } from "react";

import { apiRequest } from "../../api/client";
import { queryKeys } from "../../api/queryKeys";
import type { components } from "../../api/schema.gen";
import type { SamplePage } from "../../api/types";
import type { SampleQuery } from "./sampleBrowser";

export type SampleSummary = components["schemas"]["SampleSummary"];

/** A prompt's samples shown side by side at most (the API's page limit is 500). */
export const ACROSS_LIMIT = 200;

export const sampleKeys = {
  browse: (runId: number, query: SampleQuery) => [...queryKeys.samples(runId), "browse", query] as const,
  summary: (runId: number) => [...queryKeys.samples(runId), "summary"] as const,
  samePrompt: (runId: number, sampleId: number) => [...queryKeys.samples(runId), "prompt", sampleId] as const,
};

/** One page of the run's samples as the browser's filters ask; off while `query` is null. */
export function useSampleBrowse(runId: number, query: SampleQuery | null) {
  return useQuery({
    queryKey: sampleKeys.browse(runId, query ?? { limit: 0 }),
    queryFn: ({ signal }) => apiRequest<SamplePage>(`/runs/${runId}/samples`, { query: query ?? {}, signal }),
    enabled: query !== null,
    // The rows stay while the next filter's answer comes, instead of blinking to "Loading…".
    placeholderData: keepPreviousData,
    staleTime: Number.POSITIVE_INFINITY,
  });
}

/** The run's sample ranges, for the filter boxes' hints; off until the run has samples. */
export function useSampleSummary(runId: number, enabled: boolean) {
  return useQuery({
    queryKey: sampleKeys.summary(runId),
    queryFn: ({ signal }) => apiRequest<SampleSummary>(`/runs/${runId}/samples/summary`, { signal }),
    enabled,
    staleTime: Number.POSITIVE_INFINITY,
  });
}

/** The samples of the run with the prompt of sample `sampleId`, oldest step first. */
export function useSamePrompt(runId: number, sampleId: number | null) {
  return useQuery({
    queryKey: sampleKeys.samePrompt(runId, sampleId ?? 0),
    queryFn: ({ signal }) =>
      apiRequest<SamplePage>(`/runs/${runId}/samples`, {
        query: { prompt_of: sampleId ?? 0, order: "step", limit: ACROSS_LIMIT },
        signal,
      }),
    enabled: sampleId !== null,
    staleTime: Number.POSITIVE_INFINITY,
  });
}

/**
 * The newest page was refetched (new samples came, `refreshSamplesSoon` paced it): refetch
 * what else the browser shows that new samples change — any first page, the ranges, a
 * prompt's versions. Later pages are left alone: new samples shift them, and a person reading
 * page 3 does not want it to move under them.
 */
export function useFollowNewSamples(runId: number, newestUpdatedAt: number): void {
  const queryClient = useQueryClient();
  const seen = useRef(newestUpdatedAt);
  useEffect(() => {
    const before = seen.current;
    seen.current = newestUpdatedAt;
    if (before === 0 || newestUpdatedAt === before) return;
    const prefix = queryKeys.samples(runId);
    void queryClient.invalidateQueries({
      queryKey: prefix,
      predicate: (q) => {
        const [, , , kind, query] = q.queryKey;
        if (q.queryKey.length === prefix.length) return false; // the newest page itself, just fetched
        if (kind !== "browse") return true;
        return typeof query === "object" && query !== null && !("offset" in query);
      },
    }, { cancelRefetch: false });
  }, [queryClient, runId, newestUpdatedAt]);
}
