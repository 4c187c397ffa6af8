import { Link, useNavigate, useParams } from "react-router";

import { useTeams } from "../../api/hooks";
import { ErrorBox } from "../../components/ErrorBox";
import { StatusBadge } from "../../components/StatusBadge";
import { TableState } from "../../components/TableState";
import { useNow } from "../../components/useNow";
import { formatAgo, formatDateTime } from "../../format";
import { useQueue, type AdmittedRun, type Queue, type QueuedRun, type TeamQueue } from "./api";
import { AuditSection } from "./AuditSection";
import { formatAmount, formatEta, formatLimit, formatResources, formatShare, progressOf } from "./format";
import { Head, RunLink } from "./parts";
import "./queue.css";

/** A queued run's estimated start: the wait and its range, the absolute times on hover. */
export function EtaCell({ eta, now }: { eta: QueuedRun["eta"] | undefined; now: number }) {
  const { text, title, kind } = formatEta(eta, now);
  return (
    <span className={`eta eta-${kind}`} title={title} data-testid="eta">
      {text}
    </span>
  );
}

function Stat({ label, value, testId }: { label: string; value: string; testId: string }) {
  return (
    <div className="queue-stat">
      <span className="queue-stat-label">{label}</span>
      <span className="queue-stat-value num" data-testid={testId}>
        {value}
      </span>
    </div>
  );
}

function Cluster({ queue }: { queue: Queue }) {
  return (
    <div className="queue-cluster" data-testid="queue-cluster">
      <Stat label="cluster capacity" value={queue.capacity ? formatResources(queue.capacity) : "unknown"} testId="capacity" />
      <Stat label="held by admitted runs" value={formatResources(queue.held)} testId="held" />
      <Stat label="free" value={queue.free ? formatResources(queue.free) : "–"} testId="free" />
      {queue.capacity ? null : (
        <p className="muted small queue-cluster-note">Ray cannot be asked for the cluster's size: only quotas are checked.</p>
      )}
    </div>
  );
}

const TEAM_HEADERS = ["team", "CPU quota", "GPU quota", "holding", "share", "weight", "borrowing", "preempts", "queued", "admitted"];

/** What a team's waiting runs may ask to checkpoint and make room (Quota.preemption). */
const PREEMPTION: Record<TeamQueue["preemption"], [string, string]> = {
  never: ["never", "its waiting runs never preempt admitted ones"],
  borrowed: ["borrowed runs", "other teams' runs beyond their quota"],
  lower_priority: ["borrowed, lower priority", "other teams' runs beyond their quota, and its own runs of a lower priority"],
};

function TeamsTable({ teams }: { teams: TeamQueue[] }) {
  return (
    <table className="table queue-teams" data-testid="queue-teams">
      <Head headers={TEAM_HEADERS} />
      <tbody>
        {teams.map((t) => (
          <tr key={t.team} data-testid="queue-team" data-slug={t.slug}>
            <td>
              <Link to={`/teams/${t.team}/queue`}>{t.slug}</Link>
            </td>
            <td className={typeof t.cpu === "number" ? "num" : "muted"}>{formatLimit(t.cpu)}</td>
            <td className={typeof t.gpu === "number" ? "num" : "muted"}>{formatLimit(t.gpu)}</td>
            <td className="num">{formatResources(t.holding)}</td>
            <td className="num" title="its dominant share of the cluster now">
              {formatShare(t.share)}
            </td>
            <td className="num">{typeof t.weight === "number" ? formatAmount(t.weight) : "–"}</td>
            <td className="muted">{t.borrow ? "may borrow" : "no"}</td>
            <td className="muted" title={PREEMPTION[t.preemption]?.[1]}>
              {PREEMPTION[t.preemption]?.[0] ?? t.preemption}
            </td>
            <td className="num">{t.queued}</td>
            <td className="num">{t.admitted}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function QueuedTable({ runs, slugs, now, pending }: { runs: QueuedRun[]; slugs: Map<number, string> | null; now: number; pending: boolean }) {
  const headers = ["#", "run", ...(slugs ? ["team"] : []), "owner", "priority", "needs", "waiting for", "estimated start"];
  return (
    <table className="table queue-queued" data-testid="queue-queued">
      <Head headers={headers} />
      <tbody>
        {runs.map((q) => (
          <tr key={q.run} data-testid="queued-run" data-run={q.run}>
            <td className="num" title="place in its team's queue (1 = next)">
              {q.position ?? "–"}
            </td>
            <td className="queue-run">
              <RunLink id={q.run} name={q.name} />
              {q.attempt > 1 ? <span className="muted small">{` attempt ${q.attempt}`}</span> : null}
            </td>
            {slugs ? <td>{slugs.get(q.team) ?? q.team}</td> : null}
            <td>{q.owner}</td>
            <td className="num">{q.priority}</td>
            <td className="num">{formatResources(q.demand)}</td>
            <td className="queue-reason" data-testid="reason">
              {q.reason}
              <span className="muted small">{` · queued ${formatAgo(q.queued_at, now)}`}</span>
            </td>
            <td className="queue-eta">
              <EtaCell eta={q.eta} now={now} />
            </td>
          </tr>
        ))}
        <TableState pending={pending} isEmpty={!pending && runs.length === 0} empty="No run waits: every submitted run was admitted." columns={headers.length} />
      </tbody>
    </table>
  );
}

function Progress({ run }: { run: AdmittedRun }) {
  const fraction = progressOf(run.step, run.steps);
  if (fraction === null) return <span className="muted">{run.step === null ? "–" : `step ${run.step}`}</span>;
  return (
    <span className="queue-progress" title={`${Math.round(fraction * 100)}%`}>
      <span className="queue-progress-bar" aria-hidden="true">
        <span style={{ width: `${fraction * 100}%` }} />
      </span>
      <span className="num small">{`${run.step ?? 0}/${run.steps}`}</span>
    </span>
  );
}

function AdmittedTable({ runs, slugs, now, pending }: { runs: AdmittedRun[]; slugs: Map<number, string> | null; now: number; pending: boolean }) {
  const headers = ["run", ...(slugs ? ["team"] : []), "owner", "status", "holds", "progress", "admitted"];
  return (
    <table className="table queue-admitted" data-testid="queue-admitted">
      <Head headers={headers} />
      <tbody>
        {runs.map((a) => (
          <tr key={a.run} data-testid="admitted-run" data-run={a.run}>
            <td className="queue-run">
              <RunLink id={a.run} name={a.name} />
            </td>
            {slugs ? <td>{slugs.get(a.team) ?? a.team}</td> : null}
            <td>{a.owner}</td>
            <td>
              <StatusBadge status={a.status} />
            </td>
            <td className="num">
              {formatResources(a.demand)}
              {a.borrowed ? (
                <span className="queue-borrowed" title="admitted beyond its team's quota, on capacity nobody queued for">
                  borrowed
                </span>
              ) : null}
            </td>
            <td>
              <Progress run={a} />
            </td>
            <td className="muted" title={formatDateTime(a.admitted_at)}>
              {formatAgo(a.admitted_at, now)}
            </td>
          </tr>
        ))}
        <TableState pending={pending} isEmpty={!pending && runs.length === 0} empty="No run is admitted." columns={headers.length} />
      </tbody>
    </table>
  );
}

/**
 * /queue (every team the caller sees: their own, or all for a cluster admin) and
 * /teams/:id/queue (one team's): the cluster, each team's quota and holding, the runs waiting
 * in the scheduler's order with what they wait for and when they should start, and the runs
 * admitted; a team's page adds the scheduler's audit of its admissions and preemptions. Asked
 * again every few seconds.
 */
export function QueuePage() {
  const param = useParams().id;
  const teamId = param === undefined ? null : Number(param);
  const navigate = useNavigate();
  const teams = useTeams();
  const queue = useQueue(teamId);
  const now = useNow(1000);
  const data = queue.data;

  // The picker: the caller's teams, and any other the queue shows (a cluster admin sees all).
  const choices = new Map<number, string>();
  for (const t of teams.data?.results ?? []) choices.set(t.id, t.slug);
  for (const t of data?.teams ?? []) choices.set(t.team, t.slug);
  const team = teamId === null ? undefined : data?.teams.find((t) => t.team === teamId);
  // A team column only when more than one team shows.
  const slugs = data && data.teams.length > 1 ? new Map(data.teams.map((t) => [t.team, t.slug])) : null;
  const pending = queue.isPending;

  return (
    <section className="queue-page">
      <div className="page-head">
        <h1>Queue{team ? ` of ${team.slug}` : ""}</h1>
        <label>
          team{" "}
          <select
            value={teamId ?? ""}
            onChange={(e) => void navigate(e.target.value ? `/teams/${e.target.value}/queue` : "/queue")}
            data-testid="team-picker"
          >
            <option value="">all</option>
            {[...choices].map(([id, slug]) => (
              <option key={id} value={id}>
                {slug}
              </option>
            ))}
          </select>
        </label>
        <span className="muted small" data-testid="queue-updated">
          {queue.dataUpdatedAt ? `updated ${formatDateTime(new Date(queue.dataUpdatedAt).toISOString()).slice(11)}, every few seconds` : ""}
        </span>
      </div>
      {queue.isError ? <ErrorBox error={queue.error} title="Cannot load the queue" /> : null}
      {data ? <Cluster queue={data} /> : null}
      {data && data.teams.length ? <TeamsTable teams={data.teams} /> : null}
      <h2>
        Waiting <span className="muted small">{data ? `${data.queued.length}` : ""}</span>
      </h2>
      <div className="table-scroll">
        <QueuedTable runs={data?.queued ?? []} slugs={slugs} now={now} pending={pending} />
      </div>
      <h2>
        Admitted <span className="muted small">{data ? `${data.admitted.length}` : ""}</span>
      </h2>
      <div className="table-scroll">
        <AdmittedTable runs={data?.admitted ?? []} slugs={slugs} now={now} pending={pending} />
      </div>
      {/* Once the queue has the team (a team the caller cannot see has no audit either, and one
          error says so). Keyed: another team's audit starts on its first tab and page. */}
      {team ? <AuditSection key={team.team} teamId={team.team} now={now} /> : null}
    </section>
  );
}
