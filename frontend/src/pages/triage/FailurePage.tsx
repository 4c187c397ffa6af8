import { useState, type FormEvent } from "react";
import { Link, useParams } from "react-router";

import { ApiError } from "../../api/client";
import { useTeams } from "../../api/hooks";
import { ErrorBox } from "../../components/ErrorBox";
import { StatusBadge } from "../../components/StatusBadge";
import { TableState } from "../../components/TableState";
import { formatDateTime } from "../../format";
import { useFailure, useSetFixed, type FailureDetail } from "./api";
import { FaultBadge, FixBadge } from "./badges";
import { CountBars } from "./CountBars";
import { MAX_NOTE, fixProblems, signatureTitle } from "./format";
import "./triage.css";

/** Mark fixed with a note and a commit; or, once fixed, take the fix back. Members only. */
function FixForm({ signature }: { signature: FailureDetail }) {
  const setFixed = useSetFixed(signature.id);
  const [note, setNote] = useState("");
  const [commit, setCommit] = useState("");
  const [tried, setTried] = useState(false);
  const local = tried ? fixProblems(note, commit) : {};
  const server = setFixed.error instanceof ApiError ? setFixed.error.fields : {};
  const problem = (field: "note" | "commit") => local[field] ?? server[field]?.join("; ");

  const submit = (event: FormEvent) => {
    event.preventDefault();
    setTried(true);
    if (Object.keys(fixProblems(note, commit)).length > 0) return;
    setFixed.mutate({ note, commit: commit.trim() }, { onSuccess: () => setTried(false) });
  };

  if (signature.status !== "open") {
    return (
      <div className="form-actions">
        <button
          type="button"
          disabled={setFixed.isPending}
          onClick={() => setFixed.mutate(null)}
          data-testid="unfix"
        >
          Reopen (take the fix back)
        </button>
        {setFixed.isError ? <ErrorBox error={setFixed.error} title="Cannot reopen" /> : null}
      </div>
    );
  }
  return (
    <form className="form" onSubmit={submit} data-testid="fix-form" noValidate>
      <label className="field">
        <span>Note</span>
        <textarea
          rows={3}
          value={note}
          maxLength={MAX_NOTE + 100}
          aria-invalid={problem("note") ? true : undefined}
          onChange={(e) => setNote(e.target.value)}
          placeholder="What was wrong, what fixed it"
          data-testid="fix-note"
        />
        {problem("note") ? <p className="field-error">{problem("note")}</p> : null}
      </label>
      <label className="field">
        <span>Commit</span>
        <input
          value={commit}
          aria-invalid={problem("commit") ? true : undefined}
          onChange={(e) => setCommit(e.target.value)}
          placeholder="the fixing commit's hash"
          data-testid="fix-commit"
        />
        {problem("commit") ? <p className="field-error">{problem("commit")}</p> : null}
      </label>
      <div className="form-actions">
        <button type="submit" disabled={setFixed.isPending} data-testid="fix-submit">
          Mark fixed
        </button>
        {setFixed.isError && Object.keys(server).length === 0 ? (
          <ErrorBox error={setFixed.error} title="Cannot mark it fixed" />
        ) : null}
      </div>
    </form>
  );
}

/** One failure signature: its traceback, counts over time, its failed runs, and its fix. */
export function FailurePage() {
  const signatureId = Number(useParams().id);
  const failure = useFailure(signatureId);
  const teams = useTeams();
  if (failure.isError) return <ErrorBox error={failure.error} title="Cannot load the failure signature" />;
  if (failure.isPending) return <p className="muted">Loading…</p>;
  const s = failure.data;
  const role = teams.data?.results.find((t) => t.id === s.team)?.role ?? null;
  const mayFix = role === "member" || role === "admin";
  return (
    <section>
      <p className="crumbs">
        <Link to={`/teams/${s.team}/failures`}>Failures</Link> / signature {s.id}
      </p>
      <h1 className="triage-signature" data-testid="signature-title">
        <code>{signatureTitle(s)}</code>
      </h1>
      <p>
        <FaultBadge fault={s.fault} cause={s.cause} /> <FixBadge status={s.status} />
      </p>
      <dl className="facts">
        <div>
          <dt>failures</dt>
          <dd data-testid="count">{s.count}</dd>
        </div>
        <div>
          <dt>first seen</dt>
          <dd>{formatDateTime(s.first_seen)}</dd>
        </div>
        <div>
          <dt>last seen</dt>
          <dd>{formatDateTime(s.last_seen)}</dd>
        </div>
        {s.fixed_at ? (
          <div>
            <dt>fixed</dt>
            <dd data-testid="fixed">
              {formatDateTime(s.fixed_at)} by {s.fixed_by ?? "–"}
              {s.fixed_commit ? (
                <>
                  {" "}
                  in <code>{s.fixed_commit}</code>
                </>
              ) : null}
            </dd>
          </div>
        ) : null}
        {s.regressed_at ? (
          <div>
            <dt>came back</dt>
            <dd data-testid="regressed">{formatDateTime(s.regressed_at)}</dd>
          </div>
        ) : null}
      </dl>
      {s.fixed_note ? <p className="prewrap" data-testid="fixed-note">{s.fixed_note}</p> : null}
      <div className="triage-figures">
        <figure>
          <figcaption>failures per day, last {s.daily.counts.length} days</figcaption>
          <CountBars counts={s.daily.counts} start={s.daily.start} step={1} width={240} height={40} unit="failures" />
        </figure>
        <figure>
          <figcaption>failures per week, last {s.weekly.counts.length} weeks</figcaption>
          <CountBars counts={s.weekly.counts} start={s.weekly.start} step={7} width={168} height={40} unit="failures" />
        </figure>
      </div>
      <section className="panel">
        <h2>Mark fixed</h2>
        {mayFix ? <FixForm signature={s} /> : <p className="muted">Members of the team mark failures fixed.</p>}
      </section>
      <h2>Normalised traceback</h2>
      <pre className="triage-block" data-testid="traceback">
        {s.traceback}
      </pre>
      <h2>Newest failure</h2>
      {s.example_reason ? <p className="failure-reason">{s.example_reason}</p> : null}
      <pre className="triage-block" data-testid="log-tail">
        {s.example_log_tail || "(no log kept)"}
      </pre>
      <h2>Failed runs</h2>
      <table className="table" data-testid="failures-table">
        <thead>
          <tr>
            <th>run</th>
            <th>project</th>
            <th className="num">attempt</th>
            <th>run status</th>
            <th>failed</th>
          </tr>
        </thead>
        <tbody>
          {s.failures.map((f) => (
            <tr key={`${f.run}-${f.attempt ?? ""}`}>
              <td>
                <Link to={`/runs/${f.run}`}>
                  #{f.run} {f.run_name}
                </Link>
              </td>
              <td>{f.project}</td>
              <td className="num">{f.attempt_number ?? "–"}</td>
              <td>
                <StatusBadge status={f.run_status} />
              </td>
              <td className="muted">{formatDateTime(f.failed_at)}</td>
            </tr>
          ))}
          <TableState pending={false} isEmpty={s.failures.length === 0} empty="No failures kept." columns={5} />
        </tbody>
      </table>
    </section>
  );
}
