/**
 * The team alert feed's API: query keys and hooks for GET /teams/{id}/alerts and acknowledging
 * one alert. Kept beside the page (as triage's): nothing else uses them.
 */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

import { apiRequest } from "../../api/client";
import type { components } from "../../api/schema.gen";
import { alertKeys, type Alert } from "../run/AlertsPanel";

type AlertPage = components["schemas"]["PaginatedAlertList"];

/** The feed's filters, as the page's query string carries them ("" for all). */
export interface AlertFilters {
  state: "open" | "acknowledged" | "";
  kind: string;
}

export const PAGE_SIZE = 50;
export const FEED_REFETCH_MS = 30_000;

export const teamAlertKeys = {
  /** Everything of one team's feed, invalidated together after an acknowledgement. */
  team: (teamId: number) => ["alerts", teamId] as const,
  list: (teamId: number, filters: AlertFilters, offset: number) =>
    ["alerts", teamId, "list", filters.state, filters.kind, offset] as const,
};

/** One page of the team's alerts, newest first, filtered by the server. */
export function useTeamAlerts(teamId: number, filters: AlertFilters, offset: number) {
  const acknowledged = filters.state === "open" ? "false" : filters.state === "acknowledged" ? "true" : "";
  return useQuery({
    queryKey: teamAlertKeys.list(teamId, filters, offset),
    queryFn: ({ signal }) =>
      apiRequest<AlertPage>(`/teams/${teamId}/alerts`, {
        query: { acknowledged, kind: filters.kind, limit: PAGE_SIZE, offset },
        signal,
      }),
    // The previous page stays while the next loads, but never another team's alerts.
    placeholderData: (previous, query) => (query?.queryKey[1] === teamId ? previous : undefined),
    // Alerts are raised by the updater as runs report: the feed keeps up without a socket of its own.
    refetchInterval: FEED_REFETCH_MS,
  });
}

/** Acknowledge (members); the team's feed and the run's own Alerts panel are asked again. */
export function useAcknowledgeAlert(teamId: number) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (id: number) => apiRequest<Alert>(`/alerts/${id}/acknowledge`, { method: "POST" }),
    onSuccess: (alert) => {
      void queryClient.invalidateQueries({ queryKey: teamAlertKeys.team(teamId) });
      void queryClient.invalidateQueries({ queryKey: alertKeys.run(alert.run) });
    },
  });
}
