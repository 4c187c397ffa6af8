"""Storing a validated batch: points, series summaries and rollups, in a handful of statements.

Appends (every point above its series' last step, no (series, step) twice) are what reporters
send nearly always. They take the fast path, two statements:
1. lock the series rows and advance their summaries, computed in numpy beforehand and applied
   only when the rows show the batch is an append to each (series.lock_series);
2. one binary COPY straight into the points table (points.copy_points).
Their rollups come a moment later, off the request path: the merger (controlplane.metrics.merger,
after commit) rolls up the points above each series' mark, from the arrays the appends stored
(appended.merge_appended) or, for what it was not handed, in SQL (merges.merge_pending).

Any other batch (a replay, a correction, a point below the last step) takes the series row
locks, then the rollup locks (marks.lock_rollups; always in that order, so nothing deadlocks),
rolls up what is pending, stages the batch (points.stage) and stores it with its rollups in
one transaction (merges.store_rolled_up).

Modules: series (summaries, row locks), points (COPY, staging, upserts), marks (rollup marks
and locks), merges (rollups in SQL), appended (rollups in numpy), copy (binary COPY encoding).
Callers import the module they need; this package re-exports nothing.
"""
