import { useQueryClient } from "@tanstack/react-query";
import { useEffect, useState } from "react";

import { queryKeys } from "../../api/queryKeys";
import { isTerminal, WS_CLOSE_NOT_FOUND, type RunDetail } from "../../api/types";
import { applyRunMessage, parseMessage, resyncRun, runSocketUrl, SeqTracker } from "./live";

export type LiveState = "connecting" | "open" | "closed" | "not-found";

/** Delay before reconnect attempt n: 1, 2, 4 … capped at 30 s. */
export function reconnectDelayMs(attempt: number): number {
  return Math.min(30_000, 1000 * 2 ** Math.min(attempt, 5));
}

/**
 * Keep a websocket to /ws/runs/{id}/ open while the run page is mounted and
 * apply its messages to the query cache. Reconnects with backoff; after a
 * reconnect it refetches the run, since messages sent meanwhile are lost.
 */
export function useRunLive(runId: number): LiveState {
  const queryClient = useQueryClient();
  const [state, setState] = useState<LiveState>("connecting");

  useEffect(() => {
    let socket: WebSocket | null = null;
    let stopped = false;
    let failures = 0;
    let everOpened = false;
    let retryTimer: number | undefined;

    const connect = () => {
      setState("connecting");
      const ws = new WebSocket(runSocketUrl(runId, window.location));
      const seq = new SeqTracker();
      socket = ws;
      ws.onopen = () => {
        failures = 0;
        setState("open");
        if (everOpened) resyncRun(queryClient, runId);
        everOpened = true;
      };
      ws.onmessage = (event: MessageEvent) => {
        const message = parseMessage(event.data);
        if (!message) return;
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
        retryTimer = window.setTimeout(connect, reconnectDelayMs(failures));
        failures += 1;
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
