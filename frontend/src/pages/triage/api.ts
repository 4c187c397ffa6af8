/**
 * The triage pages' API: wire types, query keys and one hook per operation. Kept beside the
 * pages (as the chat's): nothing else uses them, and the shared api/ files stay small to merge.
 */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

import { apiRequest } from "../../api/client";
import type { components } from "../../api/schema.gen";

type Schemas = components["schemas"];

export type FailureSignature = Schemas["FailureSignature"];
export type FailureDetail = Schemas["FailureSignatureDetail"];
export type FailureSeries = Schemas["FailureSeries"];
export type SignatureFailure = Schemas["SignatureFailure"];
export type FailureStatus = Schemas["FailureStatusEnum"];
export type Fault = Schemas["FaultEnum"];
export type FixRequest = Schemas["FixInRequest"];
export type FixedWeek = Schemas["FixedWeek"];
export type SignaturePage = Schemas["PaginatedFailureSignatureList"];

/** The list's filters, as the page's query string carries them ("" for all). */
export interface TriageFilters {
  fault: Fault | "";
  fixed: "true" | "false" | "";
}

export const PAGE_SIZE = 50;
export const LIST_REFETCH_MS = 30_000;

export const triageKeys = {
  /** Everything of one team's triage, invalidated together after a fix. */
  team: (teamId: number) => ["failures", teamId] as const,
  list: (teamId: number, filters: TriageFilters, offset: number) => ["failures", teamId, "list", filters, offset] as const,
  fixedPerWeek: (teamId: number) => ["failures", teamId, "fixed-per-week"] as const,
  detail: (signatureId: number) => ["failure", signatureId] as const,
};

export function useTeamFailures(teamId: number, filters: TriageFilters, offset: number) {
  return useQuery({
    queryKey: triageKeys.list(teamId, filters, offset),
    queryFn: ({ signal }) =>
      apiRequest<SignaturePage>(`/teams/${teamId}/failures`, {
        query: { fault: filters.fault, fixed: filters.fixed, limit: PAGE_SIZE, offset },
        signal,
      }),
    // The previous page stays while the next loads, but never another team's failures.
    placeholderData: (previous, query) => (query?.queryKey[1] === teamId ? previous : undefined),
    // Failures are filed by a task as runs fail: the list keeps up without a socket of its own.
    refetchInterval: LIST_REFETCH_MS,
  });
}

export function useFixedPerWeek(teamId: number) {
  return useQuery({
    queryKey: triageKeys.fixedPerWeek(teamId),
    queryFn: ({ signal }) => apiRequest<FixedWeek[]>(`/teams/${teamId}/failures/fixed-per-week`, { signal }),
  });
}

export function useFailure(signatureId: number) {
  return useQuery({
    queryKey: triageKeys.detail(signatureId),
    queryFn: ({ signal }) => apiRequest<FailureDetail>(`/failures/${signatureId}`, { signal }),
  });
}

/** Mark fixed (a body) or take the fix back (null); the answer is the signature as it now is. */
export function useSetFixed(signatureId: number) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: FixRequest | null) =>
      body === null
        ? apiRequest<FailureDetail>(`/failures/${signatureId}/fix`, { method: "DELETE" })
        : apiRequest<FailureDetail>(`/failures/${signatureId}/fix`, { method: "POST", body }),
    onSuccess: (signature) => {
      queryClient.setQueryData(triageKeys.detail(signatureId), signature);
      void queryClient.invalidateQueries({ queryKey: triageKeys.team(signature.team) });
    },
  });
}
