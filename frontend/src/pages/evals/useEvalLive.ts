import { useQueryClient } from "@tanstack/react-query";

import { useLiveSocket, type SocketState } from "../../api/liveSocket";
import { WS_CLOSE_FORBIDDEN, WS_CLOSE_NOT_FOUND } from "../../api/types";
import { applyEvalMessage, evalSocketUrl, parseEvalMessage, resyncEval } from "./live";

/**
 * Keep a websocket to /ws/evals/{id}/ open while the eval page is mounted and apply its
 * messages to the query cache. It is up once the server said where the eval stands (its
 * snapshot); until then the page polls. After a reconnect it refetches the eval, since messages
 * sent meanwhile are lost. A refusal (not found, not yours) is final.
 */
export function useEvalLive(evalId: number): SocketState {
  const queryClient = useQueryClient();
  return useLiveSocket(evalSocketUrl(evalId, window.location), {
    onMessage: (data) => {
      const message = parseEvalMessage(data);
      if (!message) return false;
      applyEvalMessage(queryClient, evalId, message);
      return message.type === "eval.snapshot";
    },
    onResync: () => resyncEval(queryClient, evalId),
    upOn: "snapshot",
    establishedOn: "snapshot",
    refusedCodes: [WS_CLOSE_NOT_FOUND, WS_CLOSE_FORBIDDEN],
  });
}
