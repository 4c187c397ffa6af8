import { useQueryClient } from "@tanstack/react-query";
import { memo, useEffect, useRef, useState } from "react";

import { useLiveSocket, type SocketState } from "../../api/liveSocket";
import { livePointsFromWire } from "../../api/metrics";
import { queryKeys } from "../../api/queryKeys";
import { isTerminal, WS_CLOSE_NOT_FOUND, type RunDetail } from "../../api/types";
import { applyRunMessage, parseMessage, resyncRun, runSocketUrl, SeqTracker } from "../run/live";
import { patchComparisons, resyncComparisons } from "./api";
import { describeFeeds, liveRuns, SLEEP_RESYNC_MS, type LiveRun } from "./feeds";

/**
 * One run's websocket, as the run page keeps it: its messages patch the run's cache entries
 * (status, keys) and every cached comparison showing it; a reconnect, a gap or a new epoch
 * refetches what may have been missed.
 */
const RunFeed = memo(function RunFeed({ runId, onState }: { runId: number; onState: (runId: number, state: SocketState) => void }) {
  const queryClient = useQueryClient();
  const seq = useRef(new SeqTracker());
  const resync = () => {
    resyncRun(queryClient, runId);
    resyncComparisons(queryClient, [runId]);
  };
  const state = useLiveSocket(runSocketUrl(runId, window.location), {
    onConnect: () => {
      seq.current = new SeqTracker();
    },
    onMessage: (data) => {
      const message = parseMessage(data);
      if (!message) return false;
      if (seq.current.missed(message)) resync();
      applyRunMessage(queryClient, runId, message);
      if (message.type === "metrics.points" && message.run_id === runId) {
        patchComparisons(queryClient, runId, livePointsFromWire(message.series));
      } else if (message.type === "resync") {
        resyncComparisons(queryClient, [runId]);
      }
      return message.type === "run.snapshot";
    },
    onResync: resync,
    upOn: "open",
    establishedOn: "snapshot",
    refusedCodes: [WS_CLOSE_NOT_FOUND],
    isFinal: (event) => {
      const status = queryClient.getQueryData<RunDetail>(queryKeys.runDetail(runId))?.status;
      return event.code === 1000 && status !== undefined && isTerminal(status);
    },
  });
  useEffect(() => onState(runId, state), [runId, state, onState]);
  return null;
});

/** Live feeds of the running runs and their state; nothing when every run has finished. */
export function LiveFeeds({ runs }: { runs: readonly LiveRun[] }) {
  const queryClient = useQueryClient();
  const { fed, running } = liveRuns(runs);
  const [states, setStates] = useState<ReadonlyMap<number, SocketState>>(new Map());
  const onState = useRef((runId: number, state: SocketState) =>
    setStates((old) => (old.get(runId) === state ? old : new Map(old).set(runId, state))),
  ).current;
  const fedKey = fed.join(",");

  // A laptop that slept may come back with sockets that look open but missed messages.
  useEffect(() => {
    if (fed.length === 0) return;
    let hiddenAt: number | null = null;
    const onVisibility = () => {
      if (document.visibilityState === "hidden") {
        hiddenAt = Date.now();
        return;
      }
      if (hiddenAt !== null && Date.now() - hiddenAt > SLEEP_RESYNC_MS) {
        for (const runId of fed) resyncRun(queryClient, runId);
        resyncComparisons(queryClient, fed);
      }
      hiddenAt = null;
    };
    document.addEventListener("visibilitychange", onVisibility);
    return () => document.removeEventListener("visibilitychange", onVisibility);
    // `fed` is new every render; its ids are what matters.
  }, [fedKey, queryClient]);

  if (fed.length === 0) return null;
  const { text, tone } = describeFeeds(
    fed.map((id) => states.get(id) ?? "connecting"),
    running,
  );
  return (
    <>
      {fed.map((id) => (
        <RunFeed key={id} runId={id} onState={onState} />
      ))}
      <span
        className={`live live-${tone}`}
        data-testid="live-state"
        title={running > fed.length ? `Only the first ${fed.length} running runs are followed live; reload for the others.` : "websockets"}
      >
        {text}
      </span>
    </>
  );
}
