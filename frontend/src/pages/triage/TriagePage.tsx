import { Link, Navigate, useNavigate } from "react-router";

import { useTeams } from "../../api/hooks";
import { ErrorBox } from "../../components/ErrorBox";
import { TableState } from "../../components/TableState";
import { useTeamListState } from "../../components/teamListState";
import { formatDateTime } from "../../format";
import { PAGE_SIZE, useFixedPerWeek, useTeamFailures, type TriageFilters } from "./api";
import { FaultBadge, FixBadge } from "./badges";
import { CountBars } from "./CountBars";
import { filtersFrom, fixedTotal, signatureTitle, weekLabel } from "./format";
import "./triage.css";

/** /failures: the triage page of the caller's first team. */
export function FailuresIndexPage() {
  const teams = useTeams();
  if (teams.isError) return <ErrorBox error={teams.error} title="Cannot load your teams" />;
  if (teams.isPending) return <p className="muted">Loading…</p>;
  const first = teams.data.results[0];
  if (!first) return <p className="muted">You are in no team yet: failures are triaged per team.</p>;
  return <Navigate to={`/teams/${first.id}/failures`} replace />;
}

/** The fixes of the last weeks: the team's bug-fix throughput. */
function FixedPerWeek({ teamId }: { teamId: number }) {
  const weeks = useFixedPerWeek(teamId);
  if (weeks.isError) return <ErrorBox error={weeks.error} title="Cannot load the fixes per week" />;
  if (!weeks.data) return <p className="muted small">Loading the fixes per week…</p>;
  const data = weeks.data;
  const first = data[0];
  const last = data[data.length - 1];
  if (fixedTotal(data) === 0) {
    return (
      <p className="muted small" data-testid="fixed-per-week">
        No signature marked fixed in the last {data.length} weeks.
      </p>
    );
  }
  return (
    <figure data-testid="fixed-per-week">
      <figcaption>
        Signatures fixed per week: {fixedTotal(data)} in {data.length} weeks
        {first && last ? ` (${weekLabel(first.week)} – ${weekLabel(last.week)})` : ""}
      </figcaption>
      <CountBars
        counts={data.map((w) => w.fixed)}
        start={first?.week ?? ""}
        step={7}
        width={Math.max(120, data.length * 14)}
        height={40}
        unit="fixed"
      />
    </figure>
  );
}

/** A team's failures grouped by signature: infra faults first, the most frequent on top. */
export function TriagePage() {
  const { teamId, teams, team, filters, offset, setOffset, setFilter: filterSetter } = useTeamListState(filtersFrom);
  const navigate = useNavigate();
  const signatures = useTeamFailures(teamId, filters, offset);
  const results = signatures.data?.results ?? [];
  const total = signatures.data?.count ?? 0;
  const setFilter = (name: keyof TriageFilters, value: string) => filterSetter(name)(value);

  return (
    <section>
      <div className="page-head">
        <h1>Failures{team ? ` of ${team.name}` : ""}</h1>
        {teams.data && teams.data.results.length > 1 ? (
          <label>
            team{" "}
            <select
              value={teamId}
              onChange={(e) => void navigate(`/teams/${e.target.value}/failures`)}
              data-testid="team-picker"
            >
              {teams.data.results.map((t) => (
                <option key={t.id} value={t.id}>
                  {t.name}
                </option>
              ))}
            </select>
          </label>
        ) : null}
        <div className="filters">
          <label>
            fault{" "}
            <select value={filters.fault} onChange={(e) => setFilter("fault", e.target.value)} data-testid="fault-filter">
              <option value="">all</option>
              <option value="infra">infra</option>
              <option value="workload">workload</option>
            </select>
          </label>
          <label>
            fixed{" "}
            <select value={filters.fixed} onChange={(e) => setFilter("fixed", e.target.value)} data-testid="fixed-filter">
              <option value="">all</option>
              <option value="false">not fixed</option>
              <option value="true">fixed</option>
            </select>
          </label>
        </div>
      </div>
      <div className="triage-figures">
        <FixedPerWeek teamId={teamId} />
      </div>
      {signatures.isError ? <ErrorBox error={signatures.error} title="Cannot load the failures" /> : null}
      <table className="table" data-testid="signatures-table">
        <thead>
          <tr>
            <th>fault</th>
            <th>signature</th>
            <th className="num">count</th>
            <th>last 30 days</th>
            <th>first seen</th>
            <th>last seen</th>
            <th>fix</th>
          </tr>
        </thead>
        <tbody>
          {results.map((s) => (
            <tr key={s.id} data-testid={`signature-row-${s.id}`}>
              <td>
                <FaultBadge fault={s.fault} cause={s.cause} />
              </td>
              <td className="triage-signature">
                <Link to={`/failures/${s.id}`}>
                  <code>{signatureTitle(s)}</code>
                </Link>
              </td>
              <td className="num" data-testid="count">
                {s.count}
              </td>
              <td>
                <CountBars counts={s.daily.counts} start={s.daily.start} step={1} width={90} height={18} unit="failures" />
              </td>
              <td className="muted">{formatDateTime(s.first_seen)}</td>
              <td className="muted">{formatDateTime(s.last_seen)}</td>
              <td>
                <FixBadge status={s.status} />
              </td>
            </tr>
          ))}
          <TableState
            pending={signatures.isPending}
            isEmpty={signatures.isSuccess && results.length === 0}
            empty={
              filters.fault || filters.fixed
                ? "No failure signatures match these filters."
                : "No failures yet: a failed run of this team is filed here under its signature."
            }
            columns={7}
          />
        </tbody>
      </table>
      {total > PAGE_SIZE ? (
        <div className="triage-pager">
          <button type="button" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE_SIZE))}>
            Previous
          </button>
          <span className="muted small">
            {offset + 1}–{Math.min(offset + PAGE_SIZE, total)} of {total}
          </span>
          <button type="button" disabled={offset + PAGE_SIZE >= total} onClick={() => setOffset(offset + PAGE_SIZE)}>
            Next
          </button>
        </div>
      ) : null}
    </section>
  );
}
