import { Link, Navigate, useNavigate } from "react-router";

import { useTeams } from "../../api/hooks";
import { ErrorBox } from "../../components/ErrorBox";
import { TableState } from "../../components/TableState";
import { formatDateTime } from "../../format";
import { alertSteps, type Alert } from "../run/AlertsPanel";
import { PAGE_SIZE, useAcknowledgeAlert, useTeamAlerts } from "./api";

type Acknowledge = ReturnType<typeof useAcknowledgeAlert>;
import { KINDS, filtersFrom, kindLabel } from "./format";
import { useTeamListState } from "../../components/teamListState";
import "./alerts.css";

/** /alerts: the alert feed of the caller's first team (the feed's own picker switches). */
export function AlertsIndexPage() {
  const teams = useTeams();
  const first = teams.data?.results[0];
  if (teams.isError) return <ErrorBox error={teams.error} title="Cannot load your teams" />;
  if (!teams.data) return <p className="muted">Loading…</p>;
  return first ? (
    <Navigate to={`/teams/${first.id}/alerts`} replace />
  ) : (
    <p className="muted">You are in no team yet: alerts are raised on a team's runs.</p>
  );
}

const HEADERS = ["severity", "kind", "run", "message", "steps", "raised", "acknowledged"];
const NONE = "No alerts: nothing in this team's runs matches a known failure pattern.";
const NONE_MATCH = "No alerts match these filters.";
const STATES: [string, string][] = [
  ["", "all"],
  ["open", "open"],
  ["acknowledged", "acknowledged"],
];
const KIND_CHOICES: [string, string][] = [["", "all"], ...KINDS.map((k): [string, string] => [k, kindLabel(k)])];

/** A labelled select of [value, text] choices. */
function Choice(props: { label: string; value: string | number; choices: [string, string][]; onChange: (value: string) => void; testId: string }) {
  return (
    <label>
      {props.label}{" "}
      <select value={props.value} onChange={(e) => props.onChange(e.target.value)} data-testid={props.testId}>
        {props.choices.map(([value, text]) => (
          <option key={value} value={value}>
            {text}
          </option>
        ))}
      </select>
    </label>
  );
}

/** Previous / "51–100 of 240" / Next, shown only when there is more than one page. */
function Pager({ offset, limit, total, onOffset }: { offset: number; limit: number; total: number; onOffset: (offset: number) => void }) {
  if (total <= limit) return null;
  const shownTo = Math.min(offset + limit, total);
  return (
    <nav className="team-alerts-pager" aria-label="pages">
      <button type="button" disabled={offset === 0} onClick={() => onOffset(Math.max(0, offset - limit))}>
        Previous
      </button>
      <span className="muted small">{`${offset + 1}–${shownTo} of ${total}`}</span>
      <button type="button" disabled={shownTo >= total} onClick={() => onOffset(offset + limit)}>
        Next
      </button>
    </nav>
  );
}

function Acknowledged({ alert, mayAcknowledge, acknowledge }: { alert: Alert; mayAcknowledge: boolean; acknowledge: Acknowledge }) {
  if (alert.acknowledged_at) {
    return <span className="muted">{`by ${alert.acknowledged_by ?? "someone"} · ${formatDateTime(alert.acknowledged_at)}`}</span>;
  }
  if (!mayAcknowledge) return <span className="muted">open</span>;
  return (
    <button
      type="button"
      disabled={acknowledge.isPending}
      onClick={() => acknowledge.mutate(alert.id)}
      aria-label={`Acknowledge ${kindLabel(alert.kind)} on run ${alert.run}`}
    >
      Acknowledge
    </button>
  );
}

/** A team's alerts on all its runs, newest first; members acknowledge them here. */
export function TeamAlertsPage() {
  const { teamId, teams, team, filters, offset, setOffset, setFilter } = useTeamListState(filtersFrom);
  const navigate = useNavigate();
  const alerts = useTeamAlerts(teamId, filters, offset);
  const acknowledge = useAcknowledgeAlert(teamId);
  const total = alerts.data?.count ?? 0;
  const rows = alerts.data?.results ?? [];

  return (
    <section>
      <div className="page-head">
        <h1>Alerts{team ? ` of ${team.name}` : ""}</h1>
        {teams.data && teams.data.results.length > 1 ? (
          <Choice
            label="team"
            value={teamId}
            choices={teams.data.results.map((t) => [String(t.id), t.name])}
            onChange={(id) => void navigate(`/teams/${id}/alerts`)}
            testId="team-picker"
          />
        ) : null}
        <div className="filters">
          <Choice label="state" value={filters.state} choices={STATES} onChange={setFilter("state")} testId="state-filter" />
          <Choice label="kind" value={filters.kind} choices={KIND_CHOICES} onChange={setFilter("kind")} testId="kind-filter" />
        </div>
      </div>
      {alerts.isError ? <ErrorBox error={alerts.error} title="Cannot load the alerts" /> : null}
      {acknowledge.isError ? <ErrorBox error={acknowledge.error} title="Cannot acknowledge the alert" /> : null}
      <table className="table team-alerts" data-testid="alerts-table">
        <thead>
          <tr>
            {HEADERS.map((h) => (
              <th key={h}>{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((a) => (
            <tr key={a.id} data-testid="alert-row" data-kind={a.kind}>
              <td>
                <span className={`severity severity-${a.severity}`}>{a.severity}</span>
              </td>
              <td>{kindLabel(a.kind)}</td>
              <td className="team-alerts-run">
                <Link to={a.first_step === null ? `/runs/${a.run}` : `/runs/${a.run}?step=${a.first_step}`}>
                  #{a.run} {a.run_name}
                </Link>
              </td>
              <td className="team-alerts-message">{a.message}</td>
              <td className="num">{alertSteps(a) || "–"}</td>
              <td className="muted">{formatDateTime(a.created_at)}</td>
              <td className="team-alerts-ack" data-testid="acknowledged">
                <Acknowledged alert={a} mayAcknowledge={team?.role === "member" || team?.role === "admin"} acknowledge={acknowledge} />
              </td>
            </tr>
          ))}
          <TableState
            pending={alerts.isPending}
            isEmpty={alerts.isSuccess && rows.length === 0}
            empty={filters.state || filters.kind ? NONE_MATCH : NONE}
            columns={HEADERS.length}
          />
        </tbody>
      </table>
      <Pager offset={offset} limit={PAGE_SIZE} total={total} onOffset={setOffset} />
    </section>
  );
}
