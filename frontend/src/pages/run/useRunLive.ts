import { useQueryClient } from "@tanstack/react-query";
import { useRef } from "react";

import { useLiveSocket, type SocketState } from "../../api/liveSocket";
import { queryKeys } from "../../api/queryKeys";
import { isTerminal, WS_CLOSE_NOT_FOUND, type RunDetail } from "../../api/types";
import { applyRunMessage, parseMessage, resyncRun, runSocketUrl, SeqTracker } from "./live";

export { reconnectDelayMs } from "../../api/liveSocket";

export type LiveState = SocketState;

/**
 * Keep a websocket to /ws/runs/{id}/ open while the run page is mounted and
 * apply its messages to the query cache. Reconnects with backoff (growing
 * while the server closes at once with 1013, "try again later"); after a
 * reconnect, a gap or a new epoch it refetches the run, since messages sent
 * meanwhile are lost. What was sent while the feed was down is refetched once,
 * at the new snapshot (not on open: a socket the server closes at once would
 * refetch every attempt).
 */
export function useRunLive(runId: number): LiveState {
  const queryClient = useQueryClient();
  const seq = useRef(new SeqTracker());
  return useLiveSocket(runSocketUrl(runId, window.location), {
    onConnect: () => {
      seq.current = new SeqTracker(); // the counter is followed per socket
    },
    onMessage: (data) => {
      const message = parseMessage(data);
      if (!message) return false;
      if (seq.current.missed(message)) resyncRun(queryClient, runId);
      applyRunMessage(queryClient, runId, message);
      return message.type === "run.snapshot";
    },
    onResync: () => resyncRun(queryClient, runId),
    upOn: "open",
    establishedOn: "snapshot",
    refusedCodes: [WS_CLOSE_NOT_FOUND],
    // The server is done with a finished run; nothing more will come.
    isFinal: (event) => {
      const status = queryClient.getQueryData<RunDetail>(queryKeys.runDetail(runId))?.status;
      return event.code === 1000 && status !== undefined && isTerminal(status);
    },
  });
}
