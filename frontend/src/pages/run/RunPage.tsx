import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { Link, useParams, useSearchParams } from "react-router";

import { ApiError, apiRequest } from "../../api/client";
import { MAX_POINTS, useCancelRun, useCheckpoints, useMetricSeries, useRun } from "../../api/hooks";
import { emptySeries, seriesFromWire, type Series } from "../../api/metrics";
import { isTerminal, type Attempt, type MetricsResponse, type RunDetail } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { StatusBadge } from "../../components/StatusBadge";
import { useNow } from "../../components/useNow";
import { formatDateTime, formatDuration, plural, runDurationMs } from "../../format";
import { ArtifactsPanel } from "./ArtifactsPanel";
import { sandboxRecord, shortCode, waitingParts } from "./attempts";
import { isQueuedForAdmission, queuedParts } from "./queued";
import { EtaCell } from "../queue/QueuePage";
import { formatResources } from "../queue/format";
import {
  X_AXES,
  distributionsOf,
  focusStep,
  groupByNamespace,
  isTimeAxis,
  loadLayout,
  saveLayout,
  stepMarks,
  timeOrigin,
  toggled,
  viewFrom,
  withFocus,
  type ChartLayout,
  type ChartView,
  type XAxis,
} from "./charts";
import { DistributionChart } from "./DistributionChart";
import { ConfigPanel } from "./ConfigPanel";
import { HumanEvalPanel } from "./HumanEvalPanel";
import { MetricChart } from "./MetricChart";
import { AlertsPanel } from "./AlertsPanel";
import { DiagnosticsPanel, useDiagnosis } from "./DiagnosticsPanel";
import { CheckpointsPanel, SamplesPanel } from "./RolloutPanels";
import { useRunLive, type LiveState } from "./useRunLive";
import "./stepFocus.css";

export function RunPage() {
  const { id } = useParams();
  const runId = Number(id);
  if (!Number.isInteger(runId) || runId <= 0) {
    return <ErrorBox error={new Error(`"${id ?? ""}" is not a run id.`)} />;
  }
  // Keyed so that moving between runs starts from a clean socket and charts.
  return <RunView key={runId} runId={runId} />;
}

function RunView({ runId }: { runId: number }) {
  const run = useRun(runId);
  // Asked for beside the run, not after it: the panel below reads the same query.
  useDiagnosis(runId);
  const live = useRunLive(runId);

  if (run.isPending) return <p className="muted">Loading run {runId}…</p>;
  if (run.isError) {
    const notFound = run.error instanceof ApiError && run.error.status === 404;
    return (
      <>
        <ErrorBox error={run.error} title={notFound ? `Run ${runId} not found` : "Cannot load the run"} />
        <p>
          <Link to="/">← All runs</Link>
        </p>
      </>
    );
  }
  return (
    <article className="run-page">
      <RunHeader run={run.data} live={live} />
      {isQueuedForAdmission(run.data) ? (
        <QueuedBanner run={run.data} />
      ) : run.data.waiting_for && !isTerminal(run.data.status) ? (
        <WaitingBanner run={run.data} />
      ) : null}
      {run.data.status === "FAILED" ? <FailureBox run={run.data} /> : null}
      <CheckpointsPanel run={run.data} />
      <HumanEvalPanel runId={runId} />
      <Charts runId={runId} projectId={run.data.project.id} attempts={run.data.attempts} />
      <AlertsPanel runId={runId} />
      <DiagnosticsPanel runId={runId} />
      <SamplesPanel runId={runId} />
      <ArtifactsPanel runId={runId} />
      <Attempts runId={runId} attempts={run.data.attempts} />
      <ConfigPanel run={run.data} />
    </article>
  );
}

const LIVE_TEXT: Record<LiveState, string> = {
  connecting: "connecting…",
  up: "live",
  closed: "reconnecting…",
  refused: "no live feed",
};

function RunHeader({ run, live }: { run: RunDetail; live: LiveState }) {
  const cancel = useCancelRun(run.id);
  const now = useNow(1000);
  const duration = runDurationMs(run, now);
  const terminal = isTerminal(run.status);

  const onCancel = () => {
    if (window.confirm(`Cancel run ${run.id} “${run.name}”? Its Ray job will be stopped.`)) cancel.mutate();
  };

  return (
    <header className="run-head">
      <p className="crumbs">
        <Link to="/">Runs</Link> / <span className="num">#{run.id}</span>
      </p>
      <div className="run-title">
        <h1>{run.name}</h1>
        <StatusBadge status={run.status} testId="run-status" />
        <span className={`live live-${live}`} data-testid="live-state" title="websocket">
          {LIVE_TEXT[live]}
        </span>
        <span className="spacer" />
        <Link to={`/runs/new?from=${run.id}`} className="button-link" data-testid="clone-run">
          Clone with edits
        </Link>
        {!terminal ? (
          <button
            type="button"
            className="danger"
            onClick={onCancel}
            disabled={cancel.isPending || run.status === "CANCELLING"}
            data-testid="cancel-run"
          >
            {run.status === "CANCELLING" || cancel.isPending ? "Cancelling…" : "Cancel run"}
          </button>
        ) : null}
      </div>
      {cancel.isError ? <ErrorBox error={cancel.error} title="Cancel failed" /> : null}
      <dl className="facts">
        <div>
          <dt>project</dt>
          <dd>
            {run.project.team.slug}/{run.project.name}
          </dd>
        </div>
        <div>
          <dt>recipe</dt>
          <dd>
            <code>{run.recipe}</code>
          </dd>
        </div>
        {run.cloned_from !== null ? (
          <div>
            <dt>cloned from</dt>
            <dd className="num">
              <Link to={`/runs/${run.cloned_from}`} data-testid="cloned-from">
                #{run.cloned_from}
              </Link>
            </dd>
          </div>
        ) : null}
        <div>
          <dt>attempts</dt>
          <dd className="num">{run.attempts.length}</dd>
        </div>
        <div>
          <dt>created</dt>
          <dd className="num" title={run.created_at}>
            {formatDateTime(run.created_at)} by {run.created_by}
          </dd>
        </div>
        <div>
          <dt>started</dt>
          <dd className="num">{formatDateTime(run.started_at)}</dd>
        </div>
        <div>
          <dt>finished</dt>
          <dd className="num">{formatDateTime(run.finished_at)}</dd>
        </div>
        <div>
          <dt>duration</dt>
          <dd className="num">{duration === null ? "–" : formatDuration(duration)}</dd>
        </div>
        {run.tags.length > 0 ? (
          <div>
            <dt>tags</dt>
            <dd>
              {run.tags.map((tag) => (
                <span key={tag} className="tag">
                  {tag}
                </span>
              ))}
            </dd>
          </div>
        ) : null}
      </dl>
    </header>
  );
}

/** The run's work is held back by Ray until the cluster has room; say what it waits for. */
function WaitingBanner({ run }: { run: RunDetail }) {
  const now = useNow(1000);
  const { title, detail } = waitingParts(run.waiting_for);
  const since = run.waiting_since ? Date.parse(run.waiting_since) : Number.NaN;
  return (
    <section className="waiting" data-testid="run-waiting" role="status">
      <h2>{title}</h2>
      {detail ? <p className="waiting-detail">{detail}</p> : null}
      <p className="muted small">
        {Number.isNaN(since) ? "" : `For ${formatDuration(now - since)}. `}
        Ray holds this work back until the cluster has room for it: it starts by itself once other
        runs finish or are cancelled, or once nodes are added.
      </p>
    </section>
  );
}

/**
 * The run waits for the scheduler to admit it: what it waits for, its place in its team's queue
 * and the runs ahead of it, its estimated start with a range, and the team's queue page.
 */
function QueuedBanner({ run }: { run: RunDetail }) {
  const now = useNow(1000);
  const { reason, place, ahead, more } = queuedParts(run);
  const since = run.waiting_since ? Date.parse(run.waiting_since) : Number.NaN;
  const needs = formatResources(run.queue.demand);
  return (
    <section className="waiting queued" data-testid="run-waiting" role="status">
      <h2>Queued: waiting for admission</h2>
      <p className="waiting-detail" data-testid="queued-reason">
        {reason || "waiting for the next scheduling pass"}
      </p>
      <dl className="queued-facts">
        <dt>Estimated start</dt>
        <dd data-testid="queued-eta">
          <EtaCell eta={run.queue.eta} now={now} />
        </dd>
        {place ? (
          <>
            <dt>Place</dt>
            <dd data-testid="queued-place">
              {place}
              {ahead.length ? (
                <>
                  {", after "}
                  {ahead.map((id, i) => (
                    <span key={id}>
                      {i > 0 ? ", " : ""}
                      <Link to={`/runs/${id}`}>#{id}</Link>
                    </span>
                  ))}
                  {more ? ` and ${plural(more, "more run", "more runs")}` : ""}
                </>
              ) : null}
            </dd>
          </>
        ) : null}
        {needs !== "–" ? (
          <>
            <dt>Needs</dt>
            <dd className="num">{needs}</dd>
          </>
        ) : null}
      </dl>
      <p className="muted small">
        {Number.isNaN(since) ? "" : `Queued for ${formatDuration(now - since)}. `}
        The scheduler admits it once its team's quota and the cluster have room for all it needs at once.{" "}
        <Link to={`/teams/${run.project.team.id}/queue`} data-testid="queue-link">
          See the queue
        </Link>
      </p>
    </section>
  );
}

function FailureBox({ run }: { run: RunDetail }) {
  return (
    <section className="failure" data-testid="run-failure">
      <h2>Run failed</h2>
      <p className="failure-reason">{run.failure_reason || "No reason was recorded."}</p>
      {run.log_tail ? (
        <>
          <h3>Log tail</h3>
          <pre className="code-block log-tail" data-testid="run-log-tail">
            {run.log_tail}
          </pre>
        </>
      ) : (
        <p className="muted">No job log was kept.</p>
      )}
    </section>
  );
}

const VIEW_STORAGE = "barrel.chartView";

/** The charts' smoothing, y axis and x axis, remembered in this browser across runs. */
function useChartView(): [ChartView, (view: ChartView) => void] {
  const [view, setView] = useState<ChartView>(() => {
    try {
      return viewFrom(JSON.parse(localStorage.getItem(VIEW_STORAGE) ?? "null"));
    } catch {
      return viewFrom(null);
    }
  });
  const save = useCallback((next: ChartView) => {
    setView(next);
    localStorage.setItem(VIEW_STORAGE, JSON.stringify(next));
  }, []);
  return [view, save];
}

function ChartControls({ view, onChange }: { view: ChartView; onChange: (view: ChartView) => void }) {
  return (
    <div className="chart-controls" data-testid="chart-controls">
      <label>
        smoothing{" "}
        <input
          type="range"
          min={0}
          max={0.99}
          step={0.01}
          value={view.smoothing}
          onChange={(e) => onChange({ ...view, smoothing: Number(e.target.value) })}
          data-testid="smoothing"
          aria-label="smoothing"
        />{" "}
        <span className="num">{view.smoothing.toFixed(2)}</span>
      </label>
      <label>
        <input
          type="checkbox"
          checked={view.logScale}
          onChange={(e) => onChange({ ...view, logScale: e.target.checked })}
          data-testid="log-scale"
        />{" "}
        log y axis
      </label>
      <label>
        x axis{" "}
        <select
          value={view.xAxis}
          onChange={(e) => onChange({ ...view, xAxis: e.target.value as XAxis })}
          data-testid="x-axis"
          aria-label="x axis"
        >
          {X_AXES.map((x) => (
            <option key={x.value} value={x.value}>
              {x.label}
            </option>
          ))}
        </select>
      </label>
    </div>
  );
}

function Charts({ runId, projectId, attempts }: { runId: number; projectId: number; attempts: Attempt[] }) {
  const [view, setView] = useChartView();
  // Against time, the series are read with their points' wall times (a cache entry of their own).
  const timed = isTimeAxis(view.xAxis);
  const series = useMetricSeries(runId, timed);
  // Relative time counts from the run's first point, the same 0 on every chart.
  const origin = useMemo(() => (timed && series.data ? timeOrigin(Object.values(series.data)) : null), [timed, series.data]);
  const checkpoints = useCheckpoints(runId);
  const [params] = useSearchParams();
  const focus = focusStep(params.get("step"));
  const marks = useMemo(
    () => withFocus(stepMarks(checkpoints.data ?? [], attempts), focus),
    [checkpoints.data, attempts, focus],
  );
  const sectionRef = useRef<HTMLElement>(null);
  const scrolled = useRef(false);
  // A link to a step (an alert's) brings the charts into view once they are drawn.
  useEffect(() => {
    if (focus === null || scrolled.current || !sectionRef.current) return;
    scrolled.current = true;
    sectionRef.current.scrollIntoView?.({ block: "start" });
  }, [focus, series.isSuccess]);
  // A zoomed chart asks for its range at full resolution (finer buckets, down to raw points).
  const fetchRange = useCallback(
    async (key: string, start: number, end: number, signal: AbortSignal): Promise<Series> => {
      const answer = await apiRequest<MetricsResponse>(`/runs/${runId}/metrics`, {
        query: { keys: [key], start, end, max_points: MAX_POINTS, ...(timed ? { times: 1 } : {}) },
        signal,
      });
      const wire = answer.series.find((s) => s.key === key);
      return wire ? seriesFromWire(wire) : emptySeries(key);
    },
    [runId, timed],
  );
  const [layout, setLayout] = useState<ChartLayout>(() => loadLayout(projectId));
  const changeLayout = (next: ChartLayout) => {
    saveLayout(projectId, next);
    setLayout(next);
  };
  const onPin = useCallback(
    (key: string) =>
      setLayout((old) => {
        const next = { ...old, pinned: toggled(old.pinned, key) };
        saveLayout(projectId, next);
        return next;
      }),
    [projectId],
  );
  if (series.isPending) return <p className="muted">Loading metrics…</p>;
  if (series.isError) return <ErrorBox error={series.error} title="Cannot load metrics" />;
  const groups = groupByNamespace(Object.keys(series.data));
  if (groups.length === 0) {
    return <p className="muted panel">No metrics yet. Charts appear as soon as the run reports its first points.</p>;
  }
  const distributions = new Map(distributionsOf(Object.keys(series.data)).map((d) => [d.namespace, d]));
  const pinned = layout.pinned.filter((key) => series.data[key]);
  const chart = (key: string) => {
    const s = series.data[key];
    return s ? (
      <MetricChart
        key={key}
        metricKey={key}
        series={s}
        view={view}
        origin={origin}
        marks={marks}
        fetchRange={fetchRange}
        pinned={layout.pinned.includes(key)}
        onPin={onPin}
      />
    ) : null;
  };
  return (
    <section className="charts" data-testid="charts" ref={sectionRef}>
      <ChartControls view={view} onChange={setView} />
      {focus !== null ? <FocusNotice step={focus} params={params} /> : null}
      <p className="muted small chart-legend-note">
        {marks.some((m) => m.kind !== "focus")
          ? `Dashed lines: checkpoints${marks.some((m) => m.kind === "resume") ? "; orange: where a resumed attempt began" : ""}. `
          : ""}
        Drag across a chart to zoom into its raw points; double-click to reset. ☆ pins a chart to the top for every run
        of this project.
      </p>
      {pinned.length ? (
        <section className="namespace" data-testid="pinned-charts">
          <h2>pinned</h2>
          <div className="chart-grid">{pinned.map(chart)}</div>
        </section>
      ) : null}
      {groups.map((group) => {
        const folded = layout.folded.includes(group.namespace);
        const distribution = distributions.get(group.namespace);
        return (
          <section key={group.namespace} className="namespace">
            <h2>
              <button
                type="button"
                className="fold-button"
                aria-expanded={!folded}
                data-testid={`fold-${group.namespace}`}
                onClick={() => changeLayout({ ...layout, folded: toggled(layout.folded, group.namespace) })}
              >
                {folded ? "▸" : "▾"} {group.namespace}
              </button>{" "}
              <span className="muted small">{plural(group.keys.length, "chart")}</span>
            </h2>
            {folded ? null : (
              <div className="chart-grid">
                {distribution ? <DistributionChart d={distribution} series={series.data} logScale={view.logScale} /> : null}
                {group.keys.map(chart)}
              </div>
            )}
          </section>
        );
      })}
    </section>
  );
}

/** The step a link points at (`?step=N`), marked on every chart, with a link that clears it. */
function FocusNotice({ step, params }: { step: number; params: URLSearchParams }) {
  const rest = new URLSearchParams(params);
  rest.delete("step");
  const search = rest.toString();
  return (
    <p className="step-focus small" role="status" data-testid="step-focus">
      <span className="step-focus-line" aria-hidden="true" /> Step {step} is marked (solid pink line) on each chart whose steps reach it.{" "}
      <Link to={{ search: search ? `?${search}` : "" }} replace aria-label={`Clear the mark at step ${step}`}>
        clear
      </Link>
    </p>
  );
}

/**
 * The isolation model-written code ran in, from the attempt's environment record, under the code
 * version (no column of its own: the table must fit a 1280-px window); a fallback stands out with its reason.
 */
function SandboxLine({ sandbox }: { sandbox: unknown }) {
  const record = sandboxRecord(sandbox);
  if (!record) return null;
  return (
    <div
      className={record.fallback ? "sandbox-line sandbox-fallback" : "sandbox-line"}
      title={record.detail || undefined}
      data-testid="attempt-sandbox"
    >
      sandbox: {record.tier}
      {record.fallback ? " (fallback)" : ""}
    </div>
  );
}

function Attempts({ runId, attempts }: { runId: number; attempts: Attempt[] }) {
  const checkpoints = useCheckpoints(runId);
  if (attempts.length === 0) return null;
  const stepOf = new Map((checkpoints.data ?? []).map((c) => [c.id, c.step]));
  const resumedFrom = (id: number | null) =>
    id === null ? "–" : stepOf.has(id) ? `step ${stepOf.get(id)}` : `checkpoint ${id}`;
  return (
    <details className="panel" open={attempts.some((a) => a.failure_reason)} data-testid="attempts">
      <summary>Attempts ({attempts.length})</summary>
      {/* Never wider than the page: the failure column wraps, and a narrow window scrolls the table. */}
      <div className="table-scroll">
        <table className="table attempts">
          <thead>
            <tr>
              <th className="num">#</th>
              <th>status</th>
              <th>created</th>
              <th>started</th>
              <th>finished</th>
              <th>code</th>
              <th>python</th>
              <th>host</th>
              <th>resumed from</th>
              <th>failure</th>
            </tr>
          </thead>
          <tbody>
            {attempts.map((a) => (
              <tr key={a.id} title={`attempt ${a.id}`}>
                <td className="num">{a.number}</td>
                <td>
                  <StatusBadge status={a.status} />
                </td>
                <td className="num">{formatDateTime(a.created_at)}</td>
                <td className="num">{formatDateTime(a.started_at)}</td>
                <td className="num">{formatDateTime(a.finished_at)}</td>
                <td>
                  <code title={a.code_version || undefined}>{shortCode(a.code_version)}</code>
                  <SandboxLine sandbox={a.sandbox} />
                </td>
                <td className="num">{a.python || "–"}</td>
                <td className="host-cell">{a.hostname || "–"}</td>
                <td className="num">{resumedFrom(a.resume_from)}</td>
                <td className="wrap failure-cell">{a.failure_reason || ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </details>
  );
}
