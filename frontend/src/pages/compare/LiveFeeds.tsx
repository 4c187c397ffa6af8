import { useQueryClient } from "@tanstack/react-query";
import { memo, useEffect, useRef } from "react";

import { useLiveSocket } from "../../api/liveSocket";
import { livePointsFromWire } from "../../api/metrics";
import { queryKeys } from "../../api/queryKeys";
import { isTerminal, WS_CLOSE_NOT_FOUND, type RunDetail } from "../../api/types";
import { applyRunMessage, parseMessage, resyncRun, SeqTracker } from "../run/live";
import { patchComparisons, resyncComparisons } from "./api";
import { describeFeed, liveRuns, messageRun, runsSocketUrl, SLEEP_RESYNC_MS, type LiveRun } from "./feeds";

/**
 * One websocket for every followed run (ws/runs/?ids=...): each message patches its run's cache
 * entries (status, keys) and every cached comparison showing it; a reconnect, a gap in a run's
 * seq or a new epoch refetches what may have been missed (that run's, or everything).
 */
const RunsFeed = memo(function RunsFeed({ runIds, running }: { runIds: readonly number[]; running: number }) {
  const queryClient = useQueryClient();
  const trackers = useRef(new Map<number, SeqTracker>());
  const resync = (ids: readonly number[]) => {
    for (const id of ids) resyncRun(queryClient, id);
    resyncComparisons(queryClient, ids);
  };
  const state = useLiveSocket(runsSocketUrl(runIds, window.location), {
    onConnect: () => {
      trackers.current = new Map();
    },
    onMessage: (data) => {
      const message = parseMessage(data);
      if (!message) return false;
      const runId = messageRun(message);
      if (runId === null) {
        resync(runIds);
        return false;
      }
      if (!runIds.includes(runId)) return false;
      let seq = trackers.current.get(runId);
      if (!seq) trackers.current.set(runId, (seq = new SeqTracker()));
      if (seq.missed(message)) resync([runId]);
      applyRunMessage(queryClient, runId, message);
      if (message.type === "metrics.points") {
        patchComparisons(queryClient, runId, livePointsFromWire(message.series));
      } else if (message.type === "resync") {
        resyncComparisons(queryClient, [runId]);
      }
      return message.type === "run.snapshot";
    },
    onResync: () => resync(runIds),
    upOn: "open",
    establishedOn: "snapshot",
    refusedCodes: [WS_CLOSE_NOT_FOUND],
    // The server is done when every followed run has finished.
    isFinal: (event) =>
      event.code === 1000 &&
      runIds.every((id) => {
        const status = queryClient.getQueryData<RunDetail>(queryKeys.runDetail(id))?.status;
        return status !== undefined && isTerminal(status);
      }),
  });
  const { text, tone } = describeFeed(state, runIds.length, running);
  return (
    <span
      className={`live live-${tone}`}
      data-testid="live-state"
      title={running > runIds.length ? `Only the first ${runIds.length} running runs are followed live.` : "one websocket"}
    >
      {text}
    </span>
  );
});

/** The live feed of the running runs and its state; nothing when every run has finished. */
export function LiveFeeds({ runs }: { runs: readonly LiveRun[] }) {
  const queryClient = useQueryClient();
  const { fed, running } = liveRuns(runs);
  const fedKey = fed.join(",");

  // A laptop that slept may come back with a socket that looks open but missed messages.
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
  // A new set of running runs is a new socket (its ids are in the URL).
  return <RunsFeed key={fedKey} runIds={fed} running={running} />;
}
