/**
 * Websocket messages of one eval, applied to the TanStack Query cache: the eval's detail and
 * its ranking are the same entries the REST hooks fill; there is no second store.
 */
import type { QueryClient } from "@tanstack/react-query";

import { queryKeys } from "../../api/queryKeys";
import type { Eval, EvalWsMessage, PublicRanking, Ranking } from "../../api/types";

/** `ws://host/ws/evals/3/` on http, `wss://` on https. */
export function evalSocketUrl(evalId: number, location: Pick<Location, "protocol" | "host">): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/ws/evals/${evalId}/`;
}

const TYPES = new Set(["eval.snapshot", "eval.status", "eval.progress", "ranking.updated"]);

/** Parse a frame; anything that is not one of the eval's typed JSON messages is ignored. */
export function parseEvalMessage(data: unknown): EvalWsMessage | null {
  if (typeof data !== "string") return null;
  try {
    const message = JSON.parse(data) as unknown;
    if (message && typeof message === "object") {
      const type = (message as { type?: unknown }).type;
      if (typeof type === "string" && TYPES.has(type)) return message as EvalWsMessage;
    }
  } catch {
    // A malformed frame must not kill the socket handler.
  }
  return null;
}

/** Refetch everything about the eval: after a reconnect, messages sent meanwhile are lost. */
export function resyncEval(queryClient: QueryClient, evalId: number): void {
  void queryClient.invalidateQueries({ queryKey: queryKeys.eval(evalId) });
}

function lcVotes(ranking: PublicRanking): number {
  return ranking.length_controlled?.votes ?? -1;
}

/**
 * A pushed ranking replaces the cached one unless it is older (messages from two refreshes may
 * cross, and a REST fetch may have landed a newer one first). The push carries no flagged
 * voters, so the cached list is kept; a caller who sees them (the eval's creator, an admin: the
 * list is not null) refetches it from REST, which applies their role, when the votes moved.
 */
function patchRanking(queryClient: QueryClient, evalId: number, pushed: PublicRanking): void {
  const key = queryKeys.ranking(evalId);
  const old = queryClient.getQueryData<Ranking>(key);
  if (!old) return; // the first fetch brings it
  if (pushed.votes < old.votes || (pushed.votes === old.votes && lcVotes(pushed) < lcVotes(old))) return;
  queryClient.setQueryData<Ranking>(key, { ...pushed, flagged_voters: old.flagged_voters });
  if (old.flagged_voters !== null && pushed.votes !== old.votes) {
    void queryClient.invalidateQueries({ queryKey: key, exact: true });
  }
}

function patchEval(queryClient: QueryClient, evalId: number, patch: Partial<Eval>): void {
  const key = queryKeys.evalDetail(evalId);
  const before = queryClient.getQueryData<Eval>(key);
  queryClient.setQueryData<Eval>(key, (old) => (old ? { ...old, ...patch } : old));
  if (before && patch.status !== undefined && before.status !== patch.status) {
    void queryClient.invalidateQueries({ queryKey: queryKeys.evalLists });
  }
}

export function applyEvalMessage(queryClient: QueryClient, evalId: number, message: EvalWsMessage): void {
  if (message.eval_id !== evalId) return;
  switch (message.type) {
    case "eval.snapshot":
    case "eval.status":
      patchEval(queryClient, evalId, {
        status: message.status,
        failure_reason: message.failure_reason,
        closed_at: message.closed_at,
        progress: message.progress,
      });
      return;
    case "eval.progress":
      patchEval(queryClient, evalId, { progress: message.progress });
      return;
    case "ranking.updated":
      patchRanking(queryClient, evalId, message.ranking);
      return;
  }
}
