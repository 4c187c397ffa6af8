import { Link } from "react-router";

import { useEvalSets, useTeams } from "../../api/hooks";
import { ErrorBox } from "../../components/ErrorBox";
import { TableState } from "../../components/TableState";
import { formatDateTime } from "../../format";
import { mayCreate } from "./forms";

/** The eval sets of the caller's teams, newest first, and the way to make one. */
export function EvalSetsPage() {
  const sets = useEvalSets();
  const teams = useTeams();
  const results = sets.data?.results ?? [];
  return (
    <section>
      <p className="crumbs">
        <Link to="/evals">Evals</Link>
      </p>
      <div className="page-head">
        <h1>Eval sets</h1>
        <CreateLink canCreate={teams.data ? teams.data.results.some(mayCreate) : undefined} />
      </div>
      {sets.isError ? <ErrorBox error={sets.error} title="Cannot load eval sets" /> : null}
      <table className="table" data-testid="eval-sets-table">
        <thead>
          <tr>
            <th className="num">id</th>
            <th>name</th>
            <th>team</th>
            <th className="num">prompts</th>
            <th>description</th>
            <th>created by</th>
            <th>created</th>
          </tr>
        </thead>
        <tbody>
          {results.map((item) => (
            <tr key={item.id} data-testid={`eval-set-row-${item.id}`}>
              <td className="num">{item.id}</td>
              <td>
                <Link to={`/eval-sets/${item.id}`}>{item.name}</Link>
              </td>
              <td>{item.team.slug}</td>
              <td className="num">{item.prompt_count}</td>
              <td className="wrap muted">{item.description}</td>
              <td>{item.created_by}</td>
              <td className="muted">{formatDateTime(item.created_at)}</td>
            </tr>
          ))}
          <TableState
            pending={sets.isPending}
            isEmpty={sets.isSuccess && results.length === 0}
            empty="No eval sets yet."
            columns={7}
          />
        </tbody>
      </table>
    </section>
  );
}

/** Shown to members and admins; a viewer of every team sees why there is no button. */
function CreateLink({ canCreate }: { canCreate: boolean | undefined }) {
  if (canCreate === false) {
    return (
      <span className="muted small" data-testid="cannot-create">
        Only members and admins of a team create eval sets; you are a viewer.
      </span>
    );
  }
  return (
    <Link to="/eval-sets/new" className="button-link primary" data-testid="new-eval-set">
      New eval set
    </Link>
  );
}
