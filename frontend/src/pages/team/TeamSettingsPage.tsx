/**
 * /teams/{id}/settings: a team's settings, its secrets for now (where command runs get their
 * credentials). /settings opens the first team's.
 */
import { Link, Navigate, useNavigate, useParams } from "react-router";

import { useTeams } from "../../api/hooks";
import { ErrorBox } from "../../components/ErrorBox";
import { SecretsPanel } from "./SecretsPanel";
import "./team.css";

export function SettingsIndexPage() {
  const teams = useTeams();
  const first = teams.data?.results[0];
  if (teams.isError) return <ErrorBox error={teams.error} title="Cannot load your teams" />;
  if (!teams.data) return <p className="muted">Loading…</p>;
  return first ? (
    <Navigate to={`/teams/${first.id}/settings`} replace />
  ) : (
    <p className="muted">You are in no team yet: a team's settings are its admins'.</p>
  );
}

export function TeamSettingsPage() {
  const teamId = Number(useParams().id);
  const teams = useTeams();
  const navigate = useNavigate();
  const team = teams.data?.results.find((t) => t.id === teamId);
  const list = teams.data?.results ?? [];
  return (
    <section className="team-settings">
      <div className="page-head">
        <h1>Settings{team ? ` of ${team.name}` : ""}</h1>
        {team ? (
          <span className="muted" data-testid="team-role">
            you are {team.role === "admin" ? "an admin" : `a ${team.role ?? "guest"}`}
          </span>
        ) : null}
        {list.length > 1 ? (
          <label>
            team{" "}
            <select value={teamId} onChange={(e) => void navigate(`/teams/${e.target.value}/settings`)} data-testid="team-picker">
              {list.map((t) => (
                <option key={t.id} value={t.id}>
                  {t.name}
                </option>
              ))}
            </select>
          </label>
        ) : null}
        {team ? (
          <span className="muted small">
            <Link to={`/teams/${team.id}/queue`}>queue</Link> · <Link to={`/teams/${team.id}/alerts`}>alerts</Link> ·{" "}
            <Link to={`/teams/${team.id}/failures`}>failures</Link>
          </span>
        ) : null}
      </div>
      {teams.isError ? <ErrorBox error={teams.error} title="Cannot load your teams" /> : null}
      {teams.isPending ? <p className="muted">Loading…</p> : null}
      {teams.isSuccess && !team ? <p className="notice">You are not in team {teamId}.</p> : null}
      {team ? <SecretsPanel team={team} /> : null}
    </section>
  );
}
