/**
 * A team's secrets (GET /teams/{id}/secrets, PUT and DELETE /teams/{id}/secrets/{name}): names
 * and times only, whoever asks; values are written, never read back. Admins set and delete.
 */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

import { apiRequest } from "../../api/client";
import { queryKeys } from "../../api/queryKeys";
import type { components } from "../../api/schema.gen";

export type TeamSecret = components["schemas"]["TeamSecret"];

export const secretKeys = {
  list: (teamId: number) => [...queryKeys.team(teamId), "secrets"] as const,
};

function secretPath(teamId: number, name: string): string {
  return `/teams/${teamId}/secrets/${encodeURIComponent(name)}`;
}

export function useTeamSecrets(teamId: number) {
  return useQuery({
    queryKey: secretKeys.list(teamId),
    queryFn: ({ signal }) => apiRequest<TeamSecret[]>(`/teams/${teamId}/secrets`, { signal }),
  });
}

export function useSetSecret(teamId: number) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ name, value }: { name: string; value: string }) =>
      apiRequest<TeamSecret>(secretPath(teamId, name), { method: "PUT", body: { value } }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: secretKeys.list(teamId) }),
  });
}

export function useDeleteSecret(teamId: number) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (name: string) => apiRequest<void>(secretPath(teamId, name), { method: "DELETE" }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: secretKeys.list(teamId) }),
  });
}
