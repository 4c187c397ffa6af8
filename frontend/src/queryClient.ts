import { MutationCache, QueryCache, QueryClient } from "@tanstack/react-query";

import { ApiError } from "./api/client";
import { queryKeys } from "./api/queryKeys";
import type { SessionResponse } from "./api/types";

/** A 4xx will not change by asking again; network errors and 5xx get two retries. */
export function shouldRetry(failureCount: number, error: unknown): boolean {
  if (error instanceof ApiError && error.status >= 400 && error.status < 500) return false;
  return failureCount < 2;
}

export function createQueryClient(): QueryClient {
  const queryClient: QueryClient = new QueryClient({
    // An expired session shows up as an error of whatever call ran into it;
    // marking the session empty makes the layout send the user to /login.
    queryCache: new QueryCache({ onError: (error) => onAuthError(error) }),
    mutationCache: new MutationCache({ onError: (error) => onAuthError(error) }),
    defaultOptions: {
      queries: { retry: shouldRetry, refetchOnWindowFocus: true },
      mutations: { retry: false },
    },
  });
  function onAuthError(error: unknown): void {
    if (error instanceof ApiError && error.isUnauthenticated) {
      queryClient.setQueryData<SessionResponse>(queryKeys.session, { user: null });
    }
  }
  return queryClient;
}
