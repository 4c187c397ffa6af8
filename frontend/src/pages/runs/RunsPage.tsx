import { useEffect, useMemo, useState } from "react";
import { Link, useNavigate, useSearchParams } from "react-router";

import { isTerminal, RUN_STATUSES } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { StatusBadge } from "../../components/StatusBadge";
import { useNow } from "../../components/useNow";
import { formatAgo, formatDateTime, formatDuration, runDurationMs } from "../../format";
import { formatMetricValue } from "../../api/nonfinite";
import { compareRunsUrl } from "../compare/urlState";
import { metricCell, useCreateGroup, useRunTable, useRunTableKeys, type RunTableRow } from "./api";
import {
  chosenColumns,
  deleteView,
  filtersFromSearch,
  filtersToSearch,
  isRunStatus,
  loadColumns,
  loadViews,
  MAX_COLUMNS,
  nextSort,
  pageCount,
  pageLabel,
  PAGE_SIZE,
  rememberColumns,
  saveView,
  sortMark,
  sparkPath,
  tableParams,
  viewSearch,
  type RunsFilters,
  type SavedView,
} from "./filters";
import "./runs.css";

export function RunsPage() {
  const [search, setSearch] = useSearchParams();
  const filters = filtersFromSearch(search);
  const now = useNow(1000);
  const navigate = useNavigate();

  // The keys the filtered runs report (not paged, not sorted): the column picker's choices.
  const keyParams = tableParams({ ...filters, page: 0, sort: "-created_at" }, []);
  delete keyParams.limit;
  delete keyParams.offset;
  const keys = useRunTableKeys(keyParams);
  const [remembered, setRemembered] = useState(loadColumns);
  const columns = chosenColumns(filters.metrics, remembered, keys.data?.keys.map((k) => k.key));
  const runs = useRunTable(tableParams(filters, columns));

  const update = (patch: Partial<RunsFilters>) => {
    // Any change but paging goes back to the first page.
    setSearch(filtersToSearch({ ...filters, page: 0, ...patch }), { replace: true });
  };
  const setColumns = (next: string[]) => {
    rememberColumns(next);
    setRemembered(next);
    update({ metrics: next });
  };

  // Type freely; the URL (and the request) follows after a short pause.
  const [searchInput, setSearchInput] = useState(filters.q);
  useEffect(() => {
    if (searchInput.trim() === filters.q.trim()) return;
    const timer = window.setTimeout(() => update({ q: searchInput }), 300);
    return () => window.clearTimeout(timer);
    // Only typing restarts the pause; `update` and `filters` change every render.
  }, [searchInput]);

  const [selected, setSelected] = useState<Map<number, RunTableRow>>(new Map());
  const toggle = (row: RunTableRow) =>
    setSelected((old) => {
      const next = new Map(old);
      if (next.has(row.id)) next.delete(row.id);
      else next.set(row.id, row);
      return next;
    });

  const data = runs.data;
  const results = data?.results ?? [];
  const pages = pageCount(data?.count ?? 0);
  const allOnPage = results.length > 0 && results.every((r) => selected.has(r.id));
  const sortBy = (field: string, descendingFirst: boolean) => update({ sort: nextSort(filters.sort, field, descendingFirst) });
  const width = 10 + columns.length;

  return (
    <section>
      <div className="page-head">
        <h1>Runs</h1>
      </div>
      <div className="filters runs-filters">
        <label>
          Search{" "}
          <input
            type="search"
            placeholder="name, tag, recipe, owner, #id…"
            value={searchInput}
            onChange={(e) => setSearchInput(e.target.value)}
            data-testid="filter-q"
            className="runs-search"
          />
        </label>
        <label>
          Status{" "}
          <select
            value={filters.status ?? ""}
            onChange={(e) => update({ status: isRunStatus(e.target.value) ? e.target.value : null })}
            data-testid="filter-status"
          >
            <option value="">any</option>
            {RUN_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <ColumnPicker
          columns={columns}
          available={keys.data?.keys ?? []}
          loading={keys.isPending}
          onChange={setColumns}
        />
        <SavedViews current={viewSearch(filters, columns)} onOpen={(s) => setSearch(new URLSearchParams(s))} />
        <FilterChip label="project" value={filters.project} onClear={() => update({ project: undefined })} />
        <FilterChip label="group" value={filters.group} onClear={() => update({ group: undefined })} />
        <FilterChip label="recipe" value={filters.recipe} onClear={() => update({ recipe: undefined })} />
        <FilterChip label="name" value={filters.name} onClear={() => update({ name: undefined })} />
        {runs.isFetching ? <span className="muted small" data-testid="runs-updating">updating…</span> : null}
      </div>

      {selected.size > 0 ? (
        <SelectionBar selected={selected} onClear={() => setSelected(new Map())} onCompare={(ids) => void navigate(compareRunsUrl(ids))} />
      ) : null}

      {runs.isError ? <ErrorBox error={runs.error} title="Cannot load runs" /> : null}

      <div className="table-scroll">
        <table className="table runs-table" data-testid="runs-table">
          <thead>
            <tr>
              <th>
                <input
                  type="checkbox"
                  aria-label="select every run on this page"
                  checked={allOnPage}
                  onChange={() =>
                    setSelected((old) => {
                      const next = new Map(old);
                      for (const r of results) {
                        if (allOnPage) next.delete(r.id);
                        else next.set(r.id, r);
                      }
                      return next;
                    })
                  }
                />
              </th>
              <SortHeader label="id" field="created_at" sort={filters.sort} descendingFirst onSort={sortBy} numeric />
              <SortHeader label="name" field="name" sort={filters.sort} onSort={sortBy} />
              <th>project</th>
              <SortHeader label="recipe" field="recipe" sort={filters.sort} onSort={sortBy} />
              <SortHeader label="status" field="status" sort={filters.sort} onSort={sortBy} />
              <th>owner</th>
              <SortHeader label="created" field="created_at" sort={filters.sort} descendingFirst onSort={sortBy} numeric hideMark />
              <SortHeader label="duration" field="duration" sort={filters.sort} descendingFirst onSort={sortBy} numeric />
              <th>tags</th>
              {columns.map((key) => (
                <SortHeader
                  key={key}
                  label={key}
                  field={`metric:${key}`}
                  sort={filters.sort}
                  descendingFirst
                  onSort={sortBy}
                  numeric
                  metric
                />
              ))}
            </tr>
          </thead>
          <tbody>
            {results.map((run) => (
              <RunRow
                key={run.id}
                run={run}
                now={now}
                columns={columns}
                selected={selected.has(run.id)}
                onToggle={() => toggle(run)}
                onOpen={() => void navigate(`/runs/${run.id}`)}
                onFilter={update}
              />
            ))}
            {data && results.length === 0 ? (
              <tr>
                <td colSpan={width} className="empty">
                  No runs match these filters.
                </td>
              </tr>
            ) : null}
            {runs.isPending ? (
              <tr>
                <td colSpan={width} className="empty">
                  Loading…
                </td>
              </tr>
            ) : null}
          </tbody>
        </table>
      </div>

      <div className="pager">
        <button type="button" disabled={filters.page === 0} onClick={() => update({ page: filters.page - 1 })}>
          ← Previous
        </button>
        <span className="num muted">
          {pageLabel(filters.page, PAGE_SIZE, results.length, data?.count ?? 0)} · page {filters.page + 1}/{pages}
        </span>
        <button type="button" disabled={!data?.next} onClick={() => update({ page: filters.page + 1 })}>
          Next →
        </button>
      </div>
    </section>
  );
}

function FilterChip({ label, value, onClear }: { label: string; value: string | number | undefined; onClear: () => void }) {
  if (value === undefined || value === "") return null;
  return (
    <span className="tag" data-testid={`chip-${label}`}>
      {label} {value}{" "}
      <button type="button" className="link-button" aria-label={`clear the ${label} filter`} onClick={onClear}>
        ×
      </button>
    </span>
  );
}

function SortHeader(props: {
  label: string;
  field: string;
  sort: string;
  onSort: (field: string, descendingFirst: boolean) => void;
  descendingFirst?: boolean;
  numeric?: boolean;
  metric?: boolean;
  hideMark?: boolean;
}) {
  const mark = props.hideMark ? "" : sortMark(props.sort, props.field);
  const direction = mark === "▲" ? "ascending" : mark === "▼" ? "descending" : "none";
  return (
    <th className={props.numeric ? "num" : undefined} aria-sort={direction}>
      <button
        type="button"
        className={`sort-button${props.metric ? " metric-head" : ""}`}
        title={props.metric ? `${props.label}: latest value; sort` : `sort by ${props.label}`}
        onClick={() => props.onSort(props.field, props.descendingFirst ?? false)}
      >
        {props.label} {mark ? <span aria-hidden="true">{mark}</span> : null}
      </button>
    </th>
  );
}

function RunRow(props: {
  run: RunTableRow;
  now: number;
  columns: string[];
  selected: boolean;
  onToggle: () => void;
  onOpen: () => void;
  onFilter: (patch: Partial<RunsFilters>) => void;
}) {
  const { run, now } = props;
  const duration = runDurationMs(run, now);
  const stop = (e: { stopPropagation: () => void }) => e.stopPropagation();
  return (
    <tr className={`clickable${props.selected ? " chosen" : ""}`} data-testid={`run-row-${run.id}`} onClick={props.onOpen}>
      <td onClick={stop}>
        <input type="checkbox" aria-label={`select run ${run.id}`} checked={props.selected} onChange={props.onToggle} />
      </td>
      <td className="num">{run.id}</td>
      <td>
        {/* A real link too, so the row opens in a new tab with a middle click. */}
        <Link to={`/runs/${run.id}`} onClick={stop}>
          {run.name}
        </Link>
        {run.groups.map((g) => (
          <Link key={g.id} to={`/groups/${g.id}`} className="group-chip" onClick={stop} title={`${g.kind} group`}>
            {g.name}
          </Link>
        ))}
      </td>
      <td>
        {run.project.team.slug}/{run.project.name}
      </td>
      <td>
        <button
          type="button"
          className="link-button"
          title={`only ${run.recipe} runs`}
          onClick={(e) => {
            stop(e);
            props.onFilter({ recipe: run.recipe });
          }}
        >
          <code>{run.recipe}</code>
        </button>
      </td>
      <td>
        <StatusBadge status={run.status} testId={`status-${run.id}`} />
        {run.waiting_for && !isTerminal(run.status) ? (
          <span className="waiting-chip" title={run.waiting_for} data-testid={`waiting-${run.id}`}>
            waiting for resources
          </span>
        ) : null}
      </td>
      <td>{run.created_by}</td>
      <td title={`${formatDateTime(run.created_at)} by ${run.created_by}`} className="num">
        {formatAgo(run.created_at, now)}
      </td>
      <td className="num">{duration === null ? "–" : formatDuration(duration)}</td>
      <td>
        {run.tags.map((tag) => (
          <span key={tag} className="tag">
            {tag}
          </span>
        ))}
      </td>
      {props.columns.map((key) => (
        <MetricTd key={key} run={run} metric={key} />
      ))}
    </tr>
  );
}

const SPARK_W = 64;
const SPARK_H = 18;

function MetricTd({ run, metric }: { run: RunTableRow; metric: string }) {
  const cell = metricCell(run, metric);
  if (!cell) {
    return (
      <td className="num muted metric-cell" title={`run ${run.id} has not logged ${metric}`}>
        –
      </td>
    );
  }
  const path = sparkPath(cell.spark, SPARK_W, SPARK_H);
  return (
    <td className="num metric-cell" title={`${metric} = ${cell.value} at step ${cell.step} (${cell.count} points)`}>
      {path ? (
        <svg className="spark" width={SPARK_W} height={SPARK_H} aria-hidden="true">
          <polyline points={path} />
        </svg>
      ) : null}
      <span data-testid={`metric-${run.id}-${metric}`}>{formatMetricValue(cell.value)}</span>
    </td>
  );
}

function ColumnPicker(props: {
  columns: string[];
  available: { key: string; runs: number }[];
  loading: boolean;
  onChange: (columns: string[]) => void;
}) {
  const [open, setOpen] = useState(false);
  const [filter, setFilter] = useState("");
  const shown = useMemo(
    () => props.available.filter((k) => k.key.toLowerCase().includes(filter.trim().toLowerCase())).slice(0, 200),
    [props.available, filter],
  );
  const full = props.columns.length >= MAX_COLUMNS;
  return (
    <div className="column-picker">
      <button type="button" aria-expanded={open} onClick={() => setOpen(!open)} data-testid="columns-button">
        Metric columns ({props.columns.length})
      </button>
      {open ? (
        <div className="column-panel" role="dialog" aria-label="metric columns">
          <input
            type="search"
            placeholder="filter keys…"
            value={filter}
            autoFocus
            onChange={(e) => setFilter(e.target.value)}
            onKeyDown={(e) => e.key === "Escape" && setOpen(false)}
          />
          {props.loading ? <p className="muted small">Loading keys…</p> : null}
          {!props.loading && props.available.length === 0 ? <p className="muted small">These runs report no metrics yet.</p> : null}
          <ul>
            {shown.map(({ key, runs }) => {
              const on = props.columns.includes(key);
              return (
                <li key={key}>
                  <label>
                    <input
                      type="checkbox"
                      checked={on}
                      disabled={!on && full}
                      onChange={() => props.onChange(on ? props.columns.filter((c) => c !== key) : [...props.columns, key])}
                    />{" "}
                    <code>{key}</code> <span className="muted small">{runs} runs</span>
                  </label>
                </li>
              );
            })}
          </ul>
          {full ? <p className="muted small">At most {MAX_COLUMNS} columns.</p> : null}
          <button type="button" className="link-button" onClick={() => setOpen(false)}>
            Done
          </button>
        </div>
      ) : null}
    </div>
  );
}

function SavedViews({ current, onOpen }: { current: string; onOpen: (search: string) => void }) {
  const [views, setViews] = useState<SavedView[]>(loadViews);
  const [naming, setNaming] = useState<string | null>(null);
  const active = views.find((v) => v.search === current)?.name ?? "";
  return (
    <span className="saved-views">
      <label>
        View{" "}
        <select
          value={active}
          onChange={(e) => {
            const view = views.find((v) => v.name === e.target.value);
            if (view) onOpen(view.search);
          }}
          data-testid="saved-views"
        >
          <option value="">{views.length ? "saved views…" : "no saved views"}</option>
          {views.map((v) => (
            <option key={v.name} value={v.name}>
              {v.name}
            </option>
          ))}
        </select>
      </label>
      {naming === null ? (
        <button type="button" className="link-button" onClick={() => setNaming(active)}>
          save
        </button>
      ) : (
        <form
          className="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            if (naming.trim()) setViews(saveView(views, { name: naming.trim(), search: current }));
            setNaming(null);
          }}
        >
          <input aria-label="view name" placeholder="view name" value={naming} autoFocus maxLength={60} onChange={(e) => setNaming(e.target.value)} />
          <button type="submit">Save</button>
          <button type="button" className="link-button" onClick={() => setNaming(null)}>
            cancel
          </button>
        </form>
      )}
      {active ? (
        <button type="button" className="link-button" onClick={() => setViews(deleteView(views, active))}>
          forget
        </button>
      ) : null}
    </span>
  );
}

function SelectionBar(props: { selected: Map<number, RunTableRow>; onClear: () => void; onCompare: (ids: number[]) => void }) {
  const ids = [...props.selected.keys()].sort((a, b) => a - b);
  const projects = new Set([...props.selected.values()].map((r) => r.project.id));
  const [name, setName] = useState("");
  const create = useCreateGroup();
  const navigate = useNavigate();
  const oneProject = projects.size === 1;
  return (
    <div className="selection-bar" role="region" aria-label="selected runs">
      <strong>{ids.length} selected</strong>
      <button type="button" onClick={() => props.onCompare(ids)} disabled={ids.length > 100} title={ids.length > 100 ? "at most 100 runs" : undefined}>
        Compare
      </button>
      <form
        className="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          const project = [...projects][0];
          if (!oneProject || project === undefined || !name.trim()) return;
          create.mutate({ project, name: name.trim(), runs: ids }, { onSuccess: (group) => void navigate(`/groups/${group.id}`) });
        }}
      >
        <input aria-label="group name" placeholder="group name" value={name} maxLength={200} onChange={(e) => setName(e.target.value)} />
        <button
          type="submit"
          disabled={!oneProject || !name.trim() || create.isPending}
          title={oneProject ? undefined : "a group holds runs of one project"}
        >
          {create.isPending ? "Grouping…" : "Make group"}
        </button>
      </form>
      <button type="button" className="link-button" onClick={props.onClear}>
        clear
      </button>
      {!oneProject ? <span className="muted small">runs of {projects.size} projects: a group holds one project&apos;s</span> : null}
      {create.isError ? <ErrorBox error={create.error} title="Cannot make the group" /> : null}
    </div>
  );
}
