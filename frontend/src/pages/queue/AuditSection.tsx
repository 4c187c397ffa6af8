import { useRef, useState, type KeyboardEvent, type ReactNode } from "react";
import { Link } from "react-router";

import { ErrorBox } from "../../components/ErrorBox";
import { StatusBadge } from "../../components/StatusBadge";
import { TableState } from "../../components/TableState";
import { formatAgo, formatDateTime } from "../../format";
import { useAudit, type AuditKind, type AuditList } from "./api";
import { formatResources, formatWaited, preemptionOutcome } from "./format";
import { Head, RunLink } from "./parts";

/** A time as "5 min ago", the absolute time on hover. */
function When({ iso, now }: { iso: string; now: number }) {
  return (
    <td className="muted queue-when" title={formatDateTime(iso)}>
      {formatAgo(iso, now)}
    </td>
  );
}

const ADMISSION_HEADERS = ["run", "owner", "admitted", "waited", "reserved", "borrowed", "status now"];

function AdmissionsTable({ audit, now }: { audit: AuditList<"admissions">; now: number }) {
  const pending = audit.query.isPending;
  return (
    <table className="table queue-audit-table" data-testid="audit-admissions">
      <Head headers={ADMISSION_HEADERS} />
      <tbody>
        {audit.rows.map((a) => (
          <tr key={a.id} data-testid="admission" data-run={a.run}>
            <td className="queue-run">
              <RunLink id={a.run} name={a.run_name} />
              {a.attempt > 1 ? <span className="muted small">{` attempt ${a.attempt}`}</span> : null}
            </td>
            <td>{a.owner}</td>
            <When iso={a.admitted_at} now={now} />
            <td className="num" title="from its submission (or its resume) to its admission">
              {formatWaited(a.waited_s)}
            </td>
            <td className="num">{formatResources(a.demand)}</td>
            <td>
              {a.borrowed ? (
                <span className="queue-borrowed" title="admitted beyond its team's quota, on capacity nobody queued for">
                  borrowed
                </span>
              ) : (
                <span className="muted">no</span>
              )}
            </td>
            <td>
              <StatusBadge status={a.status} />
            </td>
          </tr>
        ))}
        <TableState pending={pending} isEmpty={!pending && !audit.query.isError && audit.rows.length === 0} empty="The scheduler has admitted none of this team's runs yet." columns={ADMISSION_HEADERS.length} />
      </tbody>
    </table>
  );
}

const PREEMPTION_HEADERS = ["preempted run", "made room for", "reason", "asked", "stopped"];

function PreemptionsTable({ audit, now }: { audit: AuditList<"preemptions">; now: number }) {
  const pending = audit.query.isPending;
  return (
    <table className="table queue-audit-table" data-testid="audit-preemptions">
      <Head headers={PREEMPTION_HEADERS} />
      <tbody>
        {audit.rows.map((p) => (
          <tr key={p.id} data-testid="preemption" data-run={p.run}>
            <td className="queue-run">
              <RunLink id={p.run} name={p.run_name} />
              <span className="queue-audit-sub muted small">{`${p.team} · attempt ${p.attempt}`}</span>
            </td>
            <td>
              {p.for_run === null ? <span className="muted">a deleted run</span> : <Link to={`/runs/${p.for_run}`}>#{p.for_run}</Link>}
              <span className="muted small">{` of ${p.for_team}`}</span>
            </td>
            <td className="queue-audit-reason">{p.reason}</td>
            <When iso={p.requested_at} now={now} />
            <td className="queue-audit-outcome" title={p.outcome || undefined} data-testid="preemption-outcome">
              {preemptionOutcome(p)}
            </td>
          </tr>
        ))}
        <TableState pending={pending} isEmpty={!pending && !audit.query.isError && audit.rows.length === 0} empty="No run of this team was preempted, and none was preempted for it." columns={PREEMPTION_HEADERS.length} />
      </tbody>
    </table>
  );
}

/** "20 of 134" and Show more; while older pages show, a Refresh (they are not asked again alone). */
function Pager<K extends AuditKind>({ audit }: { audit: AuditList<K> }) {
  const { query, rows, count, paused } = audit;
  if (count === null || (!query.hasNextPage && !paused)) return null;
  return (
    <div className="pager queue-audit-pager">
      <span className="muted small">{`${rows.length} of ${count}, newest first`}</span>
      {query.hasNextPage ? (
        <button type="button" onClick={() => void query.fetchNextPage()} disabled={query.isFetchingNextPage} data-testid="show-more">
          {query.isFetchingNextPage ? "Loading…" : "Show more"}
        </button>
      ) : null}
      {paused ? (
        <button
          type="button"
          className="link-button"
          onClick={() => void query.refetch()}
          disabled={query.isRefetching}
          title="Older rows show: the list is not asked again every few seconds"
        >
          {query.isRefetching ? "Refreshing…" : "Refresh"}
        </button>
      ) : null}
    </div>
  );
}

/** One list's tab panel: its error, its table, its pager. */
function Panel<K extends AuditKind>({ kind, shown, audit, children }: { kind: K; shown: boolean; audit: AuditList<K>; children: ReactNode }) {
  return (
    <div role="tabpanel" id={`audit-${kind}`} aria-labelledby={`audit-tab-${kind}`} hidden={!shown}>
      {audit.query.isError ? <ErrorBox error={audit.query.error} title={`Cannot load the ${kind}`} /> : null}
      <div className="table-scroll">{children}</div>
      <Pager audit={audit} />
    </div>
  );
}

const TABS: [AuditKind, string][] = [
  ["admissions", "Admissions"],
  ["preemptions", "Preemptions"],
];

/**
 * A team's audit: the runs the scheduler admitted (when, after how long a wait, what they
 * reserved, on borrowed capacity or not) and the runs it asked to checkpoint and make room
 * (for which run, why, and what became of them). Newest first, a page at a time; the first page
 * is asked again with the queue. Both lists stay mounted (one hidden), so each keeps its pages.
 */
export function AuditSection({ teamId, now }: { teamId: number; now: number }) {
  const [tab, setTab] = useState<AuditKind>("admissions");
  const tabs = useRef<(HTMLButtonElement | null)[]>([]);
  const admissions = useAudit("admissions", teamId);
  const preemptions = useAudit("preemptions", teamId);
  const counts = { admissions: admissions.count, preemptions: preemptions.count };

  // The tablist's arrow keys, as ARIA's tabs pattern has them.
  const onKeyDown = (event: KeyboardEvent) => {
    if (event.key !== "ArrowLeft" && event.key !== "ArrowRight") return;
    const step = event.key === "ArrowRight" ? 1 : TABS.length - 1;
    const next = (TABS.findIndex(([kind]) => kind === tab) + step) % TABS.length;
    setTab(TABS[next]![0]);
    tabs.current[next]?.focus();
  };

  return (
    <section className="queue-audit" data-testid="queue-audit">
      <div className="queue-audit-head">
        <h2>Audit</h2>
        <div role="tablist" aria-label="The scheduler's audit" className="queue-tabs" onKeyDown={onKeyDown}>
          {TABS.map(([kind, label], i) => (
            <button
              key={kind}
              ref={(el) => {
                tabs.current[i] = el;
              }}
              type="button"
              role="tab"
              id={`audit-tab-${kind}`}
              aria-selected={tab === kind}
              aria-controls={`audit-${kind}`}
              tabIndex={tab === kind ? 0 : -1}
              onClick={() => setTab(kind)}
            >
              {label}{" "}
              <span className="queue-tab-count num">{counts[kind] ?? ""}</span>
            </button>
          ))}
        </div>
      </div>
      <Panel kind="admissions" shown={tab === "admissions"} audit={admissions}>
        <AdmissionsTable audit={admissions} now={now} />
      </Panel>
      <Panel kind="preemptions" shown={tab === "preemptions"} audit={preemptions}>
        <PreemptionsTable audit={preemptions} now={now} />
      </Panel>
    </section>
  );
}
