import { Link, useParams } from "react-router";

import { useCloseEval, useEval, useRanking, useSession, useTeam } from "../../api/hooks";
import type { Eval, Ranking } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { StatusBadge } from "../../components/StatusBadge";
import { formatDateTime } from "../../format";
import { formatScore, generationProgress, voteProgress } from "./format";

export function EvalPage() {
  const evalId = Number(useParams().id);
  const evalQuery = useEval(evalId);
  const item = evalQuery.data;
  const ranked = item !== undefined && (item.status === "OPEN" || item.status === "CLOSED");
  const ranking = useRanking(evalId, ranked, item?.status === "OPEN");

  if (evalQuery.isPending) return <p className="muted">Loading…</p>;
  if (evalQuery.isError) return <ErrorBox error={evalQuery.error} title="Cannot load the eval" />;
  const data = evalQuery.data;

  return (
    <section>
      <p className="crumbs">
        <Link to="/evals">Evals</Link> / {data.project.team.slug}/{data.project.name}
      </p>
      <div className="page-head">
        <div className="run-title">
          <h1>{data.name}</h1>
          <StatusBadge status={data.status} testId="eval-status" />
        </div>
        {data.status === "OPEN" ? (
          <Link to={`/evals/${data.id}/vote`} className="button-link primary" data-testid="vote-link">
            Vote
          </Link>
        ) : null}
        <CloseButton item={data} />
      </div>
      <dl className="facts">
        <div>
          <dt>created by</dt>
          <dd>{data.created_by}</dd>
        </div>
        <div>
          <dt>created</dt>
          <dd>{formatDateTime(data.created_at)}</dd>
        </div>
        <div>
          <dt>candidates</dt>
          <dd>{data.candidates.length}</dd>
        </div>
        <div>
          <dt>progress</dt>
          <dd data-testid="eval-progress">
            {data.status === "GENERATING" ? generationProgress(data.progress) : voteProgress(data.progress)}
          </dd>
        </div>
        {data.closed_at ? (
          <div>
            <dt>closed</dt>
            <dd>{formatDateTime(data.closed_at)}</dd>
          </div>
        ) : null}
      </dl>
      {data.status === "GENERATING" ? (
        <p className="muted" data-testid="generating">
          Generating the candidates' responses; voting opens when they are all written.
        </p>
      ) : null}
      {data.status === "FAILED" ? (
        <section className="failure" data-testid="eval-failure">
          <h2>Generation failed</h2>
          <p className="failure-reason">{data.failure_reason || "No reason was recorded."}</p>
          {data.generation_run !== null ? (
            <Link to={`/runs/${data.generation_run}`}>The generation run</Link>
          ) : null}
        </section>
      ) : null}
      {ranked ? (
        <section className="panel ranking">
          <h2>Ranking</h2>
          {ranking.isError ? <ErrorBox error={ranking.error} title="Cannot load the ranking" /> : null}
          {ranking.isPending ? <p className="muted">Loading…</p> : null}
          {ranking.data ? <RankingTable ranking={ranking.data} /> : null}
        </section>
      ) : null}
    </section>
  );
}

function RankingTable({ ranking }: { ranking: Ranking }) {
  return (
    <>
      <table className="table" data-testid="ranking-table">
        <thead>
          <tr>
            <th className="num">rank</th>
            <th>candidate</th>
            <th className="num">score [95 % interval]</th>
            <th className="num">battles</th>
          </tr>
        </thead>
        <tbody>
          {ranking.rows.map((row) => (
            <tr key={row.label} data-testid={`ranking-row-${row.label}`}>
              <td className="num">{row.rank ?? "–"}</td>
              <td>{row.label}</td>
              <td className="num">{formatScore(row)}</td>
              <td className="num">{row.battles}</td>
            </tr>
          ))}
          {ranking.rows.length === 0 ? (
            <tr>
              <td colSpan={4} className="empty">
                No votes yet.
              </td>
            </tr>
          ) : null}
        </tbody>
      </table>
      <p className="muted small" data-testid="interval-note">
        Scores are Bradley–Terry on Arena's scale (1000 + 400 × log10 strength) from {ranking.votes} votes; the
        intervals are bootstrap 95 % intervals. A rank counts only the candidates whose interval lies wholly above, so
        candidates whose intervals overlap share a rank.
      </p>
    </>
  );
}

/** Only the eval's creator or an admin of its team may close it; the button shows only to them. */
function CloseButton({ item }: { item: Eval }) {
  const session = useSession();
  const team = useTeam(item.project.team.id);
  const close = useCloseEval(item.id);
  if (item.status !== "OPEN") return null;
  const isCreator = session.data?.user?.username === item.created_by;
  const isAdmin = team.data?.role === "admin";
  if (!isCreator && !isAdmin) return null;
  return (
    <>
      <button
        type="button"
        className="danger"
        disabled={close.isPending}
        data-testid="close-eval"
        onClick={() => {
          if (window.confirm("Close this eval? No more votes will be taken, and every response becomes readable.")) {
            close.mutate();
          }
        }}
      >
        Close
      </button>
      {close.isError ? <ErrorBox error={close.error} title="Cannot close the eval" /> : null}
    </>
  );
}
