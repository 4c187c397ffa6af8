import type { CSSProperties } from "react";
import { Link, useParams } from "react-router";

import { useCloseEval, useEval, useRanking, useSession, useTeam } from "../../api/hooks";
import type { Eval, Ranking, RankingRow } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { StatusBadge } from "../../components/StatusBadge";
import { formatDateTime } from "../../format";
import {
  alphaReading,
  formatScore,
  formatWinRate,
  generationProgress,
  lengthPreference,
  voteProgress,
  winRateColor,
} from "./format";
import { useEvalLive } from "./useEvalLive";

export function EvalPage() {
  const evalId = Number(useParams().id);
  // While the socket is live its messages patch the eval and its ranking: no polling then.
  const live = useEvalLive(evalId) === "up";
  const evalQuery = useEval(evalId, { poll: !live });
  const item = evalQuery.data;
  const ranked = item !== undefined && (item.status === "OPEN" || item.status === "CLOSED");
  const ranking = useRanking(evalId, ranked, item?.status === "OPEN" && !live);

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
          {live ? (
            <span className="muted small" data-testid="live" title="Updates arrive as votes are cast">
              live
            </span>
          ) : null}
        </div>
        {data.status === "OPEN" ? (
          <Link to={`/evals/${data.id}/vote`} className="button-link primary" data-testid="vote-link">
            Vote
          </Link>
        ) : null}
        <CloseButton item={data} />
        {data.status === "CLOSED" ? <Link to={`/evals/${data.id}/responses`} className="button-link" data-testid="responses-link">Responses</Link> : null}
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
      {ranked && ranking.data && ranking.data.votes > 0 ? <Analysis ranking={ranking.data} /> : null}
    </section>
  );
}

function RankingTable({ ranking }: { ranking: Ranking }) {
  const lc = ranking.length_controlled;
  const lcByLabel = new Map<string, RankingRow>((lc?.rows ?? []).map((row) => [row.label, row]));
  return (
    <>
      <table className="table" data-testid="ranking-table">
        <thead>
          <tr>
            <th className="num">rank</th>
            <th>candidate</th>
            <th className="num">score [95 % interval]</th>
            <th className="num" title="The score with the voters' preference for longer responses taken out">
              length-controlled
            </th>
            <th className="num">battles</th>
          </tr>
        </thead>
        <tbody>
          {ranking.rows.map((row) => {
            const controlled = lcByLabel.get(row.label);
            return (
              <tr key={row.label} data-testid={`ranking-row-${row.label}`}>
                <td className="num">{row.rank ?? "–"}</td>
                <td>{row.label}</td>
                <td className="num">{formatScore(row)}</td>
                <td className="num">{lc === null ? "…" : controlled ? formatScore(controlled) : "–"}</td>
                <td className="num">{row.battles}</td>
              </tr>
            );
          })}
          {ranking.rows.length === 0 ? (
            <tr>
              <td colSpan={5} className="empty">
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
      <p className="muted small" data-testid="length-note">
        {lengthNote(ranking)}
      </p>
    </>
  );
}

function lengthNote(ranking: Ranking): string {
  const lc = ranking.length_controlled;
  if (lc === null) return "Length-controlled scores are being computed.";
  const lag = lc.votes !== ranking.votes ? ` (from ${lc.votes} of the ${ranking.votes} votes; refitting)` : "";
  return `Length-controlled scores take out the voters' preference for response length${lag}: ${lengthPreference(lc.beta)}.`;
}

/** The win-rate matrix, the voters' agreement and, for the eval's managers, the voters flagged as noise. */
function Analysis({ ranking }: { ranking: Ranking }) {
  return (
    <section className="panel" data-testid="analysis">
      <h2>Analysis</h2>
      <p data-testid="agreement">
        Agreement between voters (Krippendorff's α on battles with several votes): {alphaReading(ranking.alpha)}
      </p>
      {ranking.flagged_voters !== null ? <FlaggedVoters voters={ranking.flagged_voters} /> : null}
      <WinRateMatrix ranking={ranking} />
    </section>
  );
}

function FlaggedVoters({ voters }: { voters: string[] }) {
  return (
    <p data-testid="flagged-voters">
      Voters whose votes look like noise (Arena's outlier test; only you and the team's admins see this):{" "}
      {voters.length === 0 ? "none." : <strong>{voters.join(", ")}</strong>}
    </p>
  );
}

const CELL: CSSProperties = { padding: "0.2rem 0.35rem", textAlign: "center", fontSize: "0.78rem" };

/** Rows and columns in ranking order; a cell is the row's share of the score against the column. */
function WinRateMatrix({ ranking }: { ranking: Ranking }) {
  const order = ranking.rows.map((row) => ranking.labels.indexOf(row.label)).filter((i) => i >= 0);
  return (
    <>
      <h3>Win rates</h3>
      <div style={{ overflowX: "auto" }}>
        <table data-testid="win-rate" style={{ borderCollapse: "collapse" }}>
          <thead>
            <tr>
              <th style={CELL} />
              {order.map((j, n) => (
                <th key={j} style={CELL} title={ranking.labels[j]}>
                  {n + 1}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {order.map((i, n) => (
              <tr key={i} data-testid={`win-rate-row-${ranking.labels[i]}`}>
                <th style={{ ...CELL, textAlign: "left", whiteSpace: "nowrap" }}>
                  {n + 1}. {ranking.labels[i]}
                </th>
                {order.map((j) => {
                  const rate = i === j ? null : (ranking.win_rate[i]?.[j] ?? null);
                  return (
                    <td
                      key={j}
                      style={{ ...CELL, background: winRateColor(rate), border: "1px solid var(--line)" }}
                      title={i === j ? undefined : `${ranking.labels[i]} against ${ranking.labels[j]}`}
                    >
                      {i === j ? "" : formatWinRate(rate)}
                    </td>
                  );
                })}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <p className="muted small">
        Each cell: the share of the votes' score the row's candidate took against the column's (a tie or both-bad counts
        half); columns are numbered as the rows.
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
