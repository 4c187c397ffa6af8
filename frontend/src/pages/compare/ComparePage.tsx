import { memo, useCallback, useDeferredValue, useEffect, useId, useMemo, useRef, useState } from "react";
import { useQueryClient } from "@tanstack/react-query";
import { Link, useLocation, useNavigate } from "react-router";

import { useGroup } from "../../api/hooks";
import type { Series } from "../../api/metrics";
import type { RunDetail, RunGroupDetail } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { plural } from "../../format";
import { StatsPanel } from "../groups/StatsPanel";
import { alignKey, chartData, commonGrid, type ChartLayout, type SeriesTable, type SeriesView } from "./align";
import {
  bucketsFor,
  prefetchCompareSeries,
  useCompareRuns,
  useCompareSeries,
  useRunDetails,
  useRunKeys,
  type StepRange,
} from "./api";
import { CompareChart, type EntryKind } from "./CompareChart";
import { differingPaths } from "./config";
import { configKey, differingParamKeys, differingTagKeys, groupRunsBy, GroupingError, type ConfigGroup } from "./grouping";
import { ConfigDiff } from "./ConfigDiff";
import { finalRows, type FinalEntry, type FinalRow } from "./finals";
import { FinalTable } from "./FinalTable";
import { HoverStore } from "./hover";
import { defaultKeys, keyCounts, orderKeys } from "./keys";
import { KeyPicker } from "./KeyPicker";
import { Legend, type LegendEntry } from "./Legend";
import { LiveFeeds } from "./LiveFeeds";
import { useThrottled } from "./throttle";
import { palette } from "./palette";
import { RunPicker } from "./RunPicker";
import { compareSearch, MAX_SMOOTHING, parseCompareState, type BandMode, type CompareState } from "./urlState";
import "./compare.css";

type Update = (patch: Partial<CompareState>, options?: { push?: boolean }) => void;

/**
 * Many runs on shared axes: `/compare?runs=1,2,3` or `/compare?group=7`, one chart per metric,
 * runs optionally grouped by a config field into a mean line with a band, a table of final
 * values against a baseline, and the config diff of any two runs. The view lives in the URL.
 */
export function ComparePage() {
  const location = useLocation();
  const navigate = useNavigate();
  // The view is held here and written to the URL, not read back from it on every change: the
  // router applies navigations in a transition, and a checkbox or slider bound to the URL would
  // jump back until the charts had re-rendered. A URL that changes otherwise (back, a link) wins.
  const [state, setState] = useState(() => parseCompareState(new URLSearchParams(location.search)));
  const written = useRef(location.search);
  useEffect(() => {
    if (location.search === written.current) return;
    written.current = location.search;
    setState(parseCompareState(new URLSearchParams(location.search)));
  }, [location.search]);
  const latest = useRef(state);
  latest.current = state;
  const update = useCallback<Update>(
    (patch, options) => {
      const next = { ...latest.current, ...patch };
      latest.current = next;
      setState(next);
      const search = compareSearch(next);
      written.current = search ? `?${search}` : "";
      void navigate({ search: written.current }, { replace: !options?.push });
    },
    [navigate],
  );
  const pickRuns = (runs: number[]) => update({ runs, group: null, by: "" }, { push: true });

  if (state.group !== null) return <GroupCompare key={state.group} groupId={state.group} state={state} update={update} />;
  if (state.runs.length === 0) {
    return (
      <section data-testid="compare-empty">
        <div className="page-head">
          <h1>Compare runs</h1>
        </div>
        <p className="muted">
          Choose runs to overlay on shared axes: their metrics, grouped by a config field if you like, their final
          values and their config differences. A sweep's runs can be opened from its group's page.
        </p>
        <RunPicker initial={[]} onPick={pickRuns} action="Compare" />
      </section>
    );
  }
  return <CompareRuns key={state.runs.join(",")} runIds={state.runs} group={null} state={state} update={update} />;
}

function GroupCompare({ groupId, state, update }: { groupId: number; state: CompareState; update: Update }) {
  const group = useGroup(groupId);
  const runIds = useMemo(() => group.data?.runs.map((run) => run.id) ?? [], [group.data]);
  if (group.isPending) return <p className="muted">Loading group {groupId}…</p>;
  if (group.isError) return <ErrorBox error={group.error} title={`Cannot load group ${groupId}`} />;
  if (runIds.length === 0) {
    return (
      <section>
        <CompareHead title={group.data.name} group={group.data} runs={[]} state={state} update={update} />
        <p className="muted">This group has no runs yet.</p>
      </section>
    );
  }
  return <CompareRuns key={runIds.join(",")} runIds={runIds} group={group.data} state={state} update={update} />;
}

interface CompareRunsProps {
  runIds: number[];
  group: RunGroupDetail | null;
  state: CompareState;
  update: Update;
}

/**
 * Loads every run's detail (config) and metric keys, all in one request; when that is refused (a
 * run not found) each run is asked for alone, and those that cannot be loaded are left out, and named.
 */
function CompareRuns({ runIds, group, state, update }: CompareRunsProps) {
  const bulk = useCompareRuns(runIds);
  // With the keys in the URL, the metrics go out beside the runs' details (see prefetchCompareSeries).
  const queryClient = useQueryClient();
  const urlKeys = state.keys;
  useEffect(() => {
    if (!urlKeys || urlKeys.length === 0) return;
    const keys = orderKeys(urlKeys);
    const query = { runs: runIds, keys, maxPoints: bucketsFor(runIds.length, keys.length), range: null };
    void prefetchCompareSeries(queryClient, query);
    // Only what the page opens with: later changes of keys are the loaded page's to fetch.
  }, [queryClient, runIds]);
  // The bulk answer fills the per-run entries these read; only a refused one makes them ask.
  const details = useRunDetails(runIds, !bulk.isPending);
  const keys = useRunKeys(runIds, !bulk.isPending);
  const loaded = details.filter((d) => !d.isPending).length + keys.filter((k) => !k.isPending).length;
  const title = group ? group.name : plural(runIds.length, "run");

  // The query results are new arrays on every render; the runs only change when their data does.
  const detailData = useStableList(details.map((d) => d.data));
  const keyData = useStableList(keys.map((k) => k.data));
  const { runs, keysByRun } = useMemo(() => {
    const loadedRuns: RunDetail[] = [];
    const loadedKeys: string[][] = [];
    detailData.forEach((detail, i) => {
      const runKeys = keyData[i];
      if (detail && runKeys) {
        loadedRuns.push(detail);
        loadedKeys.push(runKeys.keys.map((k) => k.key));
      }
    });
    return { runs: loadedRuns, keysByRun: loadedKeys };
  }, [detailData, keyData]);
  const failed: { id: number; error: unknown }[] = [];
  runIds.forEach((id, i) => {
    // A refetch that fails keeps the data it had: only a run never loaded is left out.
    const detail = details[i];
    const runKeys = keys[i];
    const error = (!detail?.data && detail?.error) || (!runKeys?.data && runKeys?.error);
    if (error) failed.push({ id, error });
  });
  const pending = loaded < runIds.length * 2;

  return (
    <section className="compare-page">
      <CompareHead title={title} group={group} runs={pending ? [] : runs} state={state} update={update} />
      {failed.length > 0 ? (
        <ErrorBox
          error={failed[0]?.error}
          title={`${failed.length === runIds.length ? "Cannot load the runs" : "Left out"} ${failed.map((f) => `#${f.id}`).join(", ")}`}
        />
      ) : null}
      {pending ? (
        <p className="muted" data-testid="compare-loading">
          Loading runs… ({Math.floor(loaded / 2)} of {runIds.length})
        </p>
      ) : runs.length > 0 ? (
        <CompareLoaded key={runs.map((r) => r.id).join(",")} runs={runs} keysByRun={keysByRun} group={group} state={state} update={update} />
      ) : null}
    </section>
  );
}

function CompareHead({
  title,
  group,
  runs,
  state,
  update,
}: {
  title: string;
  group: RunGroupDetail | null;
  runs: readonly RunDetail[];
  state: CompareState;
  update: Update;
}) {
  const [picking, setPicking] = useState(false);
  const current = group ? group.runs.map((run) => run.id) : state.runs;
  return (
    <>
      <p className="crumbs">
        {group ? (
          <>
            <Link to="/groups">Run groups</Link> / <Link to={`/groups/${group.id}`}>{group.name}</Link>
          </>
        ) : (
          <Link to="/">Runs</Link>
        )}
      </p>
      <div className="page-head">
        <h1>Compare {title}</h1>
        <LiveFeeds runs={runs} />
        <span className="spacer" />
        <button type="button" onClick={() => setPicking(!picking)} aria-expanded={picking} data-testid="change-runs">
          {picking ? "Close" : "Change runs"}
        </button>
      </div>
      {picking ? (
        <div className="panel">
          <RunPicker
            initial={current}
            action="Compare"
            onPick={(ids) => {
              setPicking(false);
              update({ runs: ids, group: null, by: "" }, { push: true });
            }}
          />
        </div>
      ) : null}
    </>
  );
}

/** A group of runs as the sweep page's statistics panel wants it, grouped by `by` into `groups`. */
function statsGroup(base: RunGroupDetail | null, runs: readonly RunDetail[], by: string, groups: readonly ConfigGroup[]): RunGroupDetail | null {
  const first = runs[0];
  if (!first) return null;
  return {
    id: base?.id ?? 0,
    name: base?.name ?? "compared runs",
    kind: base?.kind ?? "manual",
    project: base?.project ?? first.project,
    recipe: base?.recipe ?? first.recipe,
    config: base?.config ?? {},
    grid: { [by]: groups.map((g) => g.value) },
    seeds: base?.seeds ?? [],
    created_by: base?.created_by ?? first.created_by,
    created_at: base?.created_at ?? first.created_at,
    run_count: runs.length,
    runs: [...runs],
  };
}

interface LoadedProps {
  runs: RunDetail[];
  keysByRun: string[][];
  group: RunGroupDetail | null;
  state: CompareState;
  update: Update;
}

function CompareLoaded({ runs, keysByRun, group, state, update }: LoadedProps) {
  const syncKey = `compare-${useId()}`;
  const hover = useMemo(() => new HoverStore(), []);
  // Keyed by its runs' ids: they are fixed for its life. A live status patch gives a run a new
  // object but keeps its config, so the grouping, the layout and the charts' data stay put.
  const [runIds] = useState(() => runs.map((run) => run.id));
  const configs = useStableList(runs.map((run) => run.config));
  const tags = useStableList(runs.map((run) => run.tags));
  const params = useStableList(runs.map((run) => run.params));
  const counts = useMemo(() => keyCounts(keysByRun), [keysByRun]);
  const orderedKeys = useMemo(() => (state.keys ? orderKeys(state.keys) : defaultKeys(keysByRun)), [state.keys, keysByRun]);
  // The same keys after a live batch (new key lists, same names) are the same array.
  const chosenKeys = useStableBy(orderedKeys, orderedKeys.join("\n"));
  const gridFields = useMemo(
    () => (group?.kind === "sweep" ? Object.keys((group.grid ?? {}) as Record<string, unknown>) : []),
    [group],
  );
  const forGrouping = useMemo(
    () => runIds.map((id, i) => ({ id, name: runs[i]?.name, config: configs[i], tags: tags[i], params: params[i] })),
    // The names only label an error: a live patch's new run objects must not regroup.
    [runIds, configs, tags, params],
  );
  const differing = useMemo(
    () => ({
      // "": a config that is no object (or an empty one), not a field to group by.
      config: differingPaths(configs)
        .filter((path) => path !== "")
        .map(configKey),
      tags: differingTagKeys(forGrouping),
      params: differingParamKeys(forGrouping),
    }),
    [configs, forGrouping],
  );
  // A key the runs cannot be split by (two tags of its prefix on one run) is said, and each run drawn alone.
  const grouping = useMemo((): { groups: ConfigGroup[] | null; error: string | null } => {
    if (!state.by) return { groups: null, error: null };
    try {
      return { groups: groupRunsBy(forGrouping, state.by), error: null };
    } catch (error) {
      if (error instanceof GroupingError) return { groups: null, error: error.message };
      throw error;
    }
  }, [forGrouping, state.by]);
  const configGroups = grouping.groups;
  const layout = useMemo((): ChartLayout => {
    if (!configGroups) return { kind: "runs" };
    const index = new Map(runIds.map((id, i) => [id, i]));
    return { kind: "groups", groups: configGroups.map((g) => g.runIds.map((id) => index.get(id) ?? -1)), band: state.band };
  }, [configGroups, runIds, state.band]);

  // Entries of the legend and the final table: runs, or groups of them.
  const { entries, finalEntries } = useMemo((): { entries: LegendEntry[]; finalEntries: FinalEntry[] } => {
    if (configGroups) {
      const colours = palette(configGroups.length);
      return {
        entries: configGroups.map<LegendEntry>((g, i) => ({
          id: `g:${g.id}`,
          label: g.label,
          colour: colours[i] ?? "#000",
          detail: `(${g.runIds.length} run${g.runIds.length === 1 ? "" : "s"})`,
          title: `${state.by} = ${g.label.slice(g.label.indexOf("=") + 1)}: runs ${g.runIds.map((id) => `#${id}`).join(", ")}`,
        })),
        finalEntries: configGroups.map<FinalEntry>((g) => ({ id: `g:${g.id}`, label: g.label, runIds: g.runIds, isGroup: true })),
      };
    }
    const colours = palette(runs.length);
    return {
      entries: runs.map<LegendEntry>((run, i) => ({
        id: `r:${run.id}`,
        label: run.name,
        colour: colours[i] ?? "#000",
        detail: `#${run.id}`,
        title: `run #${run.id} ${run.name} (${run.status.toLowerCase()})`,
      })),
      finalEntries: runs.map<FinalEntry>((run) => ({ id: `r:${run.id}`, label: `#${run.id} ${run.name}`, runIds: [run.id], isGroup: false })),
    };
  }, [configGroups, runs, state.by]);
  const kind: EntryKind = layout.kind;
  // A live batch gives the runs new objects (their key lists' latest values) and so new entries
  // with the same content: kept, the legend and every chart stay untouched (a new entries array
  // redrew every chart, 100 lines each, at every batch). The charts draw no title (the status).
  const legendEntries = useStableBy(
    entries,
    entries.map((e) => [e.id, e.label, e.colour, e.detail, e.title].join("\u0000")).join("\u0001"),
  );
  const chartEntries = useStableBy(
    legendEntries,
    entries.map((e) => [e.id, e.label, e.colour].join("\u0000")).join("\u0001"),
  );

  const [hiddenBy, setHiddenBy] = useState<{ by: string; ids: ReadonlySet<string> }>({ by: state.by, ids: new Set() });
  const hidden = hiddenBy.by === state.by ? hiddenBy.ids : EMPTY;
  const setHidden = (ids: ReadonlySet<string>) => setHiddenBy({ by: state.by, ids });
  const [hovered, setHighlight] = useState<string | null>(null);
  // A row that vanished under the pointer (the legend regrouped) never says the pointer left.
  const highlight = hovered !== null && entries.some((e) => e.id === hovered) ? hovered : null;
  const [zoom, setZoom] = useState<StepRange | null>(null);
  const onZoom = useCallback(
    (range: StepRange | null) =>
      setZoom((old) => (old === range || (old && range && old.min === range.min && old.max === range.max) ? old : range)),
    [],
  );

  const maxPoints = bucketsFor(runIds.length, chosenKeys.length);
  const full = useCompareSeries({ runs: runIds, keys: chosenKeys, maxPoints, range: null }, true, true);
  const zoomed = useCompareSeries({ runs: runIds, keys: chosenKeys, maxPoints, range: zoom }, zoom !== null, false);
  const fullFresh = full.isSuccess && !full.isPlaceholderData;
  const table: SeriesTable | undefined = zoom && zoomed.data ? zoomed.data : full.data;
  const tableFresh = zoom && zoomed.data ? true : fullFresh;

  const smoothing = useDeferredValue(state.smooth);
  const view = useMemo<SeriesView>(() => ({ smoothing, logScale: state.log }), [smoothing, state.log]);

  // The final values follow live points once a second at most: at a batch a second from each of
  // 100 runs, re-rendering and laying out a 100-row table at every application of points was most
  // of the page's long frames. Other keys or rows show at once.
  const finalsKey = finalEntries.map((e) => [e.id, e.label, e.runIds.join(",")].join("\u0000")).join("\u0001");
  const stableFinalEntries = useStableBy(finalEntries, finalsKey);
  const finalData = useThrottled(full.data, FINALS_EVERY_MS, `${chosenKeys.join("\n")}\u0002${finalsKey}`);
  const rows = useMemo(
    () => (finalData ? finalRows(stableFinalEntries, finalData, chosenKeys) : []),
    [finalData, stableFinalEntries, chosenKeys],
  );
  const stats = configGroups && configGroups.length > 1 ? statsGroup(group, runs, state.by, configGroups) : null;

  return (
    <>
      <KeyPicker
        counts={counts}
        runCount={runs.length}
        chosen={chosenKeys}
        isDefault={state.keys === null}
        onChange={(keys) => update({ keys })}
      />
      <Controls
        state={state}
        update={update}
        gridFields={gridFields}
        differing={differing}
        groupingError={grouping.error}
        zoom={zoom}
        onResetZoom={() => setZoom(null)}
        refining={zoom !== null && zoomed.isFetching}
      />
      {full.isError ? <ErrorBox error={full.error} title="Cannot load metrics" /> : null}
      {zoomed.isError ? <ErrorBox error={zoomed.error} title="Cannot load the zoomed range" /> : null}
      <div className="compare-body">
        <div className="compare-charts" data-testid="compare-charts">
          {chosenKeys.length === 0 ? (
            <p className="muted panel">No metric chosen: pick some under “Metrics” above.</p>
          ) : null}
          {chosenKeys.map((key) => (
            <ChartSlot
              key={key}
              metricKey={key}
              byRun={table?.get(key)}
              loaded={tableFresh}
              runIds={runIds}
              view={view}
              layout={layout}
              kind={kind}
              entries={chartEntries}
              hidden={hidden}
              highlight={highlight}
              zoom={zoom}
              syncKey={syncKey}
              hover={hover}
              onZoom={onZoom}
            />
          ))}
        </div>
        <Legend
          heading={
            configGroups
              ? `${configGroups.length} groups by ${state.by}`
              : `${runs.length} run${runs.length === 1 ? "" : "s"}`
          }
          entries={legendEntries}
          hidden={hidden}
          onToggle={(id) => {
            const next = new Set(hidden);
            if (next.has(id)) next.delete(id);
            else next.add(id);
            setHidden(next);
          }}
          onOnly={(id) => setHidden(new Set(entries.filter((e) => e.id !== id).map((e) => e.id)))}
          onShowAll={() => setHidden(EMPTY)}
          onHighlight={setHighlight}
          hover={hover}
        />
      </div>
      <FinalTableSlot rows={rows} keys={chosenKeys} grouped={configGroups !== null} pending={!full.data} />
      {stats ? <StatsPanel key={state.by} group={stats} /> : null}
      <ConfigDiff runs={runs} />
    </>
  );
}

const EMPTY: ReadonlySet<string> = new Set();

/** The previous array while every item is the same object: a memo key for lists rebuilt each render. */
function useStableList<T>(list: readonly T[]): readonly T[] {
  const ref = useRef(list);
  if (ref.current.length !== list.length || list.some((item, i) => item !== ref.current[i])) ref.current = list;
  return ref.current;
}

/** The first value given while `key` stays the same: a memo key for values rebuilt with equal content. */
function useStableBy<T>(value: T, key: string): T {
  const ref = useRef({ value, key });
  if (ref.current.key !== key) ref.current = { value, key };
  return ref.current.value;
}

/** How often (ms), at most, live points reach the final values table. */
const FINALS_EVERY_MS = 1000;

const FinalTableSlot = memo(function FinalTableSlot(props: {
  rows: FinalRow[];
  keys: string[];
  grouped: boolean;
  pending: boolean;
}) {
  if (props.pending) return null;
  return <FinalTable rows={props.rows} keys={props.keys} grouped={props.grouped} />;
});

interface ChartSlotProps {
  metricKey: string;
  byRun: ReadonlyMap<number, Series> | undefined;
  /** Whether the answer covers this key (else the key was just added and is on its way). */
  loaded: boolean;
  runIds: readonly number[];
  view: SeriesView;
  layout: ChartLayout;
  kind: EntryKind;
  entries: readonly LegendEntry[];
  hidden: ReadonlySet<string>;
  highlight: string | null;
  zoom: StepRange | null;
  syncKey: string;
  hover: HoverStore;
  onZoom: (range: StepRange | null) => void;
}

/** One key: its runs aligned once per answer (or live batch, or view change), then charted. */
const ChartSlot = memo(function ChartSlot({ metricKey, byRun, loaded, runIds, view, layout, ...chart }: ChartSlotProps) {
  const ready = byRun !== undefined || loaded;
  const aligned = useMemo(() => {
    if (!ready) return null;
    const runSeries = runIds.map((id) => byRun?.get(id));
    // Groups are averaged on a common grid of steps; runs each keep their own points.
    return alignKey(runSeries, view, { grid: layout.kind === "groups" ? commonGrid(runSeries) : null });
  }, [ready, byRun, runIds, view, layout.kind]);
  const data = useMemo(() => (aligned ? chartData(aligned, layout, view.logScale) : null), [aligned, layout, view.logScale]);
  const reporting = byRun ? runIds.filter((id) => (byRun.get(id)?.step.length ?? 0) > 0).length : 0;
  const note = !ready ? (
    "loading…"
  ) : reporting === 0 ? (
    <span data-testid="chart-missing">no run reports it{chart.zoom ? " in this range" : ""}</span>
  ) : reporting < runIds.length ? (
    <span data-testid="chart-missing" title="The other runs never logged this key (or not in this range).">
      {reporting} of {runIds.length} runs report it
    </span>
  ) : aligned?.snapped ? (
    <span title="The runs' steps never line up: their points are shown on a common grid of steps.">on a step grid</span>
  ) : null;
  return <CompareChart metricKey={metricKey} data={data} logScale={view.logScale} note={note} {...chart} />;
});

const BAND_LABELS: Record<BandMode, string> = {
  minmax: "min–max across runs",
  stderr: "mean ± standard error",
};

function KeyOptions({ label, keys }: { label: string; keys: readonly string[] }) {
  if (keys.length === 0) return null;
  return (
    <optgroup label={label}>
      {keys.map((key) => (
        <option key={key} value={key}>
          {key}
        </option>
      ))}
    </optgroup>
  );
}

function Controls({
  state,
  update,
  gridFields,
  differing,
  groupingError,
  zoom,
  onResetZoom,
  refining,
}: {
  state: CompareState;
  update: Update;
  gridFields: readonly string[];
  /** Grouping keys whose values differ between the runs: config fields, tag prefixes, MLflow params. */
  differing: { config: readonly string[]; tags: readonly string[]; params: readonly string[] };
  groupingError: string | null;
  zoom: StepRange | null;
  onResetZoom: () => void;
  refining: boolean;
}) {
  const others = differing.config.filter((path) => !gridFields.includes(path));
  const known = state.by === "" || [gridFields, others, differing.tags, differing.params].some((keys) => keys.includes(state.by));
  return (
    <div className="chart-controls compare-controls" data-testid="compare-controls">
      <label title="A config field, a tag prefix (tags written prefix:value) or an MLflow param; in the URL as by=optim.lr, by=tag:seed or by=param:lr">
        group by{" "}
        <select value={state.by} onChange={(e) => update({ by: e.target.value })} data-testid="group-by">
          <option value="">nothing: each run a line</option>
          {gridFields.length > 0 ? (
            <optgroup label="the sweep's grid">
              {gridFields.map((path) => (
                <option key={path} value={path} data-grid="true">
                  {path}
                </option>
              ))}
            </optgroup>
          ) : null}
          <KeyOptions label="config fields that differ" keys={others} />
          <KeyOptions label="tags (prefix:value)" keys={differing.tags} />
          <KeyOptions label="MLflow params" keys={differing.params} />
          {known ? null : <option value={state.by}>{state.by}</option>}
        </select>
      </label>
      {groupingError ? (
        <span className="error-box" role="alert" data-testid="grouping-error">
          {groupingError}
        </span>
      ) : null}
      {state.by ? (
        <label>
          band{" "}
          <select
            value={state.band}
            onChange={(e) => update({ band: e.target.value === "stderr" ? "stderr" : "minmax" })}
            data-testid="band-mode"
          >
            {(Object.keys(BAND_LABELS) as BandMode[]).map((mode) => (
              <option key={mode} value={mode}>
                {BAND_LABELS[mode]}
              </option>
            ))}
          </select>
        </label>
      ) : null}
      <label>
        smoothing{" "}
        <input
          type="range"
          min={0}
          max={MAX_SMOOTHING}
          step={0.01}
          value={state.smooth}
          onChange={(e) => update({ smooth: Number(e.target.value) })}
          aria-label="smoothing"
          data-testid="smoothing"
        />{" "}
        <span className="num">{state.smooth.toFixed(2)}</span>
      </label>
      <label>
        <input type="checkbox" checked={state.log} onChange={(e) => update({ log: e.target.checked })} data-testid="log-scale" />{" "}
        log y axis
      </label>
      {zoom ? (
        <span className="compare-zoom" data-testid="zoom-state">
          steps <span className="num">{zoom.min}</span>–<span className="num">{zoom.max}</span>
          {refining ? <span className="muted"> (refining…)</span> : null}{" "}
          <button type="button" onClick={onResetZoom}>
            Reset zoom
          </button>
        </span>
      ) : null}
    </div>
  );
}
