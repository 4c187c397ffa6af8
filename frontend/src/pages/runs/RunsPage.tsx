import { useEffect, useState } from "react";
import { Link, useNavigate, useSearchParams } from "react-router";

import { useRuns } from "../../api/hooks";
import { RUN_STATUSES, type RunSummary } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { StatusBadge } from "../../components/StatusBadge";
import { useNow } from "../../components/useNow";
import { formatAgo, formatDateTime, formatDuration, runDurationMs } from "../../format";
import { filtersFromSearch, filtersToSearch, isRunStatus, listParams, pageCount, pageLabel, PAGE_SIZE, type RunsFilters } from "./filters";

export function RunsPage() {
  const [search, setSearch] = useSearchParams();
  const filters = filtersFromSearch(search);
  const runs = useRuns(listParams(filters));
  const now = useNow(1000);
  const navigate = useNavigate();

  const update = (patch: Partial<RunsFilters>) => {
    // Any filter change goes back to the first page.
    setSearch(filtersToSearch({ ...filters, page: 0, ...patch }), { replace: true });
  };

  // Type freely; the URL (and the request) follows after a short pause.
  const [nameInput, setNameInput] = useState(filters.name);
  useEffect(() => {
    if (nameInput.trim() === filters.name.trim()) return;
    const timer = window.setTimeout(() => update({ name: nameInput }), 300);
    return () => window.clearTimeout(timer);
    // Only typing restarts the pause; `update` and `filters` change every render.
  }, [nameInput]);

  const data = runs.data;
  const results = data?.results ?? [];
  const pages = pageCount(data?.count ?? 0);

  return (
    <section>
      <div className="page-head">
        <h1>Runs</h1>
        <div className="filters">
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
          <label>
            Name{" "}
            <input
              type="search"
              placeholder="contains…"
              value={nameInput}
              onChange={(e) => setNameInput(e.target.value)}
              data-testid="filter-name"
            />
          </label>
          {filters.project ? (
            <span className="tag">
              project {filters.project}{" "}
              <button type="button" className="link-button" onClick={() => update({ project: undefined })}>
                ×
              </button>
            </span>
          ) : null}
          {runs.isFetching ? <span className="muted small">updating…</span> : null}
        </div>
      </div>

      {runs.isError ? <ErrorBox error={runs.error} title="Cannot load runs" /> : null}

      <table className="table runs-table" data-testid="runs-table">
        <thead>
          <tr>
            <th className="num">id</th>
            <th>name</th>
            <th>project</th>
            <th>recipe</th>
            <th>status</th>
            <th>created</th>
            <th className="num">duration</th>
            <th>tags</th>
          </tr>
        </thead>
        <tbody>
          {results.map((run) => (
            <RunRow key={run.id} run={run} now={now} onOpen={() => void navigate(`/runs/${run.id}`)} />
          ))}
          {data && results.length === 0 ? (
            <tr>
              <td colSpan={8} className="empty">
                No runs match these filters.
              </td>
            </tr>
          ) : null}
          {runs.isPending ? (
            <tr>
              <td colSpan={8} className="empty">
                Loading…
              </td>
            </tr>
          ) : null}
        </tbody>
      </table>

      <div className="pager">
        <button type="button" disabled={filters.page === 0} onClick={() => update({ page: filters.page - 1 })}>
          ← Newer
        </button>
        <span className="num muted">
          {pageLabel(filters.page, PAGE_SIZE, results.length, data?.count ?? 0)} · page {filters.page + 1}/{pages}
        </span>
        <button
          type="button"
          disabled={!data?.next}
          onClick={() => update({ page: filters.page + 1 })}
        >
          Older →
        </button>
      </div>
    </section>
  );
}

function RunRow({ run, now, onOpen }: { run: RunSummary; now: number; onOpen: () => void }) {
  const duration = runDurationMs(run, now);
  return (
    <tr className="clickable" data-testid={`run-row-${run.id}`} onClick={onOpen}>
      <td className="num">{run.id}</td>
      <td>
        {/* A real link too, so the row opens in a new tab with a middle click. */}
        <Link to={`/runs/${run.id}`} onClick={(e) => e.stopPropagation()}>
          {run.name}
        </Link>
      </td>
      <td>
        {run.project.team.slug}/{run.project.name}
      </td>
      <td>
        <code>{run.recipe}</code>
      </td>
      <td>
        <StatusBadge status={run.status} testId={`status-${run.id}`} />
      </td>
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
    </tr>
  );
}
