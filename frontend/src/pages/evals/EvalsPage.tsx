import { Link } from "react-router";

import { useEvals, useTeams } from "../../api/hooks";
import type { Eval } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { TableState } from "../../components/TableState";
import { StatusBadge } from "../../components/StatusBadge";
import { formatDateTime } from "../../format";
import { mayCreate } from "./forms";
import { generationProgress, voteProgress } from "./format";

export function EvalsPage() {
  const evals = useEvals();
  const teams = useTeams();
  // Unknown until the teams load: the link shows, and the form explains a refusal.
  const canCreate = teams.data ? teams.data.results.some(mayCreate) : true;
  const results = evals.data?.results ?? [];
  return (
    <section>
      <div className="page-head">
        <h1>Evals</h1>
        {evals.isFetching ? <span className="muted small">updating…</span> : null}
        <span className="spacer" />
        <Link to="/eval-sets" className="button-link" data-testid="eval-sets-link">
          Eval sets
        </Link>
        {canCreate ? (
          <Link to="/evals/new" className="button-link primary" data-testid="new-eval">
            New eval
          </Link>
        ) : (
          <span className="muted small" data-testid="cannot-create">
            Only members and admins of a team create evals; you are a viewer.
          </span>
        )}
      </div>
      {evals.isError ? <ErrorBox error={evals.error} title="Cannot load evals" /> : null}
      <table className="table" data-testid="evals-table">
        <thead>
          <tr>
            <th className="num">id</th>
            <th>name</th>
            <th>project</th>
            <th>status</th>
            <th>progress</th>
            <th>created by</th>
            <th>created</th>
          </tr>
        </thead>
        <tbody>
          {results.map((item) => (
            <EvalRow key={item.id} item={item} />
          ))}
          <TableState
            pending={evals.isPending}
            isEmpty={evals.isSuccess && results.length === 0}
            empty="No evals yet."
            columns={7}
          />
        </tbody>
      </table>
    </section>
  );
}

function EvalRow({ item }: { item: Eval }) {
  return (
    <tr data-testid={`eval-row-${item.id}`}>
      <td className="num">{item.id}</td>
      <td>
        <Link to={`/evals/${item.id}`}>{item.name}</Link>
      </td>
      <td>
        {item.project.team.slug}/{item.project.name}
      </td>
      <td>
        <StatusBadge status={item.status} testId={`eval-status-${item.id}`} />
      </td>
      <td className="muted">{item.status === "GENERATING" ? generationProgress(item.progress) : voteProgress(item.progress)}</td>
      <td>{item.created_by}</td>
      <td className="muted">{formatDateTime(item.created_at)}</td>
    </tr>
  );
}
