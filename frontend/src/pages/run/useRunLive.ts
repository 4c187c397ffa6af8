import { useQueryClient } from "@tanstack/react-query";
import { useEffect, useState } from "react";

import { queryKeys } from "../../api/queryKeys";
import { isTerminal, WS_CLOSE_NOT_FOUND, type RunDetail } from "../../api/types";
import { applyRunMessage, parseMessage, ReconnectBackoff, resyncRun, runSocketUrl, SeqTracker } from "./live";

export { reconnectDelayMs } from "./live";

export type LiveState = "connecting" | "open" | "closed" | "not-found";

/**
 * Keep a websocket to /ws/runs/{id}/ open while the run page is mounted and
 * apply its messages to the query cache. Reconnects with backoff (growing
 * while the server closes at once with 1013, "try again later"); after a
 * reconnect, a gap or a new epoch it refetches the run, since messages sent
 * meanwhile are lost.
 */
export function useRunLive(runId: number): LiveState {
  const queryClient = useQueryClient();
  const [state, setState] = useState<LiveState>("connecting");

  useEffect(() => {
    let socket: WebSocket | null = null;
    let stopped = false;
    const backoff = new ReconnectBackoff();
    let everStarted = false;
    let retryTimer: number | undefined;

    const connect = () => {
      setState("connecting");
      const ws = new WebSocket(runSocketUrl(runId, window.location));
      const seq = new SeqTracker();
      socket = ws;
      ws.onopen = () => setState("open");
      ws.onmessage = (event: MessageEvent) => {
        const message = parseMessage(event.data);
        if (!message) return;
        if (message.type === "run.snapshot") {
          // The feed stands again: what was sent while it was down is refetched once, here
          // (not on open: a socket the server closes at once would refetch every attempt).
          if (everStarted) resyncRun(queryClient, runId);
          everStarted = true;
          backoff.established();
        }
        if (seq.missed(message)) resyncRun(queryClient, runId);
        applyRunMessage(queryClient, runId, message);
      };
      ws.onclose = (event: CloseEvent) => {
        if (stopped) return;
        if (event.code === WS_CLOSE_NOT_FOUND) {
          setState("not-found");
          return;
        }
        const status = queryClient.getQueryData<RunDetail>(queryKeys.runDetail(runId))?.status;
        if (event.code === 1000 && status && isTerminal(status)) {
          // The server is done with a finished run; nothing more will come.
          setState("closed");
          return;
        }
        setState("closed");
        retryTimer = window.setTimeout(connect, backoff.nextDelayMs());
      };
    };

    connect();
    return () => {
      stopped = true;
      window.clearTimeout(retryTimer);
      socket?.close(1000);
    };
  }, [runId, queryClient]);

  return state;
}
