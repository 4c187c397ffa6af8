import { useQueryClient } from "@tanstack/react-query";
import { memo, useCallback, useEffect, useRef } from "react";

import { useLiveSocket } from "../../api/liveSocket";
import { livePointsFromWire, type LivePoint } from "../../api/metrics";
import { queryKeys } from "../../api/queryKeys";
import { isTerminal, WS_CLOSE_NOT_FOUND, type RunDetail, type WsMessage } from "../../api/types";
import { applyRunMessage, parseMessage, resyncRun, SeqTracker } from "../run/live";
import { patchComparisons, resyncComparisons } from "./api";
import { describeFeed, flushIntervalMs, liveRuns, messageRun, runsSocketUrl, SLEEP_RESYNC_MS, type LiveRun } from "./feeds";

/** Past this many ms more without a frame (a hidden tab draws none) the points are applied anyway. */
const FLUSH_FALLBACK_MS = 250;

/**
 * One websocket for every followed run (ws/runs/?ids=...): each message patches its run's cache
 * entries (status, keys) and every cached comparison showing it; a reconnect, a gap in a run's
 * seq or a new epoch refetches what may have been missed (that run's, or everything).
 *
 * Points are applied every run's together, at an animation frame at most every
 * flushIntervalMs(runs): 100 runs at a batch a second each would otherwise rebuild the comparison
 * and redraw every chart 100 times a second. Each application realigns every run of the keys that
 * got points, and their charts are redrawn, a few a frame (drawQueue), with every run's line.
 */
const RunsFeed = memo(function RunsFeed({ runIds, running }: { runIds: readonly number[]; running: number }) {
  const queryClient = useQueryClient();
  const trackers = useRef(new Map<number, SeqTracker>());
  // Whether this connection's first snapshot came: only that one establishes the feed (each
  // followed run sends one, and every later one would refetch everything again).
  const snapshotSeen = useRef(false);
  const pending = useRef(new Map<number, { message: WsMessage; at: number }[]>());
  const scheduled = useRef<{ frame: number; wait: number; timer: number } | null>(null);
  const flushedAt = useRef(0);

  const flush = useCallback(() => {
    if (scheduled.current) {
      cancelAnimationFrame(scheduled.current.frame);
      window.clearTimeout(scheduled.current.wait);
      window.clearTimeout(scheduled.current.timer);
      scheduled.current = null;
    }
    const batch = pending.current;
    if (batch.size === 0) return;
    pending.current = new Map();
    flushedAt.current = performance.now();
    const pointsByRun = new Map<number, LivePoint[]>();
    for (const [runId, messages] of batch) {
      const points: LivePoint[] = [];
      for (const { message, at } of messages) {
        // Stamped with its arrival: a fetch that started since re-applies it (fetchCompareSeries).
        applyRunMessage(queryClient, runId, message, at);
        if (message.type === "metrics.points") points.push(...livePointsFromWire(message.series));
      }
      pointsByRun.set(runId, points);
    }
    patchComparisons(queryClient, pointsByRun);
  }, [queryClient]);
  useEffect(() => flush, [flush]);

  const resync = (ids: readonly number[]) => {
    flush();
    for (const id of ids) resyncRun(queryClient, id);
    resyncComparisons(queryClient, ids);
  };
  const state = useLiveSocket(runsSocketUrl(runIds, window.location), {
    onConnect: () => {
      flush();
      trackers.current = new Map();
      snapshotSeen.current = false;
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
      if (message.type === "metrics.points") {
        const list = pending.current.get(runId);
        const entry = { message, at: performance.now() };
        if (list) list.push(entry);
        else pending.current.set(runId, [entry]);
        if (!scheduled.current) {
          const delay = Math.max(0, flushedAt.current + flushIntervalMs(runIds.length) - entry.at);
          const next = { frame: 0, wait: 0, timer: window.setTimeout(flush, delay + FLUSH_FALLBACK_MS) };
          next.wait = window.setTimeout(() => (next.frame = requestAnimationFrame(flush)), delay);
          scheduled.current = next;
        }
        return false;
      }
      // Anything else lands after the points that came before it.
      flush();
      applyRunMessage(queryClient, runId, message);
      if (message.type === "resync") resyncComparisons(queryClient, [runId]);
      if (message.type !== "run.snapshot" || snapshotSeen.current) return false;
      snapshotSeen.current = true;
      return true;
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
