import { Link } from "react-router";

import { useGroups } from "../../api/hooks";
import { ErrorBox } from "../../components/ErrorBox";
import { TableState } from "../../components/TableState";
import { formatDateTime } from "../../format";
import { describeSweep } from "./format";

/** The run groups of the caller's teams (sweeps and hand-made groups), newest first. */
export function GroupsPage() {
  const groups = useGroups();
  const results = groups.data?.results ?? [];
  return (
    <section>
      <div className="page-head">
        <h1>Run groups</h1>
        <span className="muted small">Submit a sweep with POST /api/v1/sweeps; group runs with POST /api/v1/groups.</span>
      </div>
      {groups.isError ? <ErrorBox error={groups.error} title="Cannot load run groups" /> : null}
      <table className="table" data-testid="groups-table">
        <thead>
          <tr>
            <th className="num">id</th>
            <th>name</th>
            <th>project</th>
            <th>what varies</th>
            <th className="num">runs</th>
            <th>created by</th>
            <th>created</th>
          </tr>
        </thead>
        <tbody>
          {results.map((group) => (
            <tr key={group.id} data-testid={`group-row-${group.id}`}>
              <td className="num">{group.id}</td>
              <td>
                <Link to={`/groups/${group.id}`}>{group.name}</Link>
              </td>
              <td>
                {group.project.team.slug}/{group.project.name}
              </td>
              <td className="wrap muted">{describeSweep(group)}</td>
              <td className="num">{group.run_count}</td>
              <td>{group.created_by}</td>
              <td className="muted">{formatDateTime(group.created_at)}</td>
            </tr>
          ))}
          <TableState
            pending={groups.isPending}
            isEmpty={groups.isSuccess && results.length === 0}
            empty="No run groups yet."
            columns={7}
          />
        </tbody>
      </table>
    </section>
  );
}
