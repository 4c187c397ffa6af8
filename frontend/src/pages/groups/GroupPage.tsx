import { Link, useParams } from "react-router";

import { useGroup } from "../../api/hooks";
import { ErrorBox } from "../../components/ErrorBox";
import { StatusBadge } from "../../components/StatusBadge";
import { formatDateTime } from "../../format";
import { describeSweep } from "./format";
import { GroupDiagnostics } from "./GroupDiagnostics";
import { StatsPanel } from "./StatsPanel";

/** A run group: what it varied, its runs, and whether the configs differ. */
export function GroupPage() {
  const groupId = Number(useParams().id);
  const group = useGroup(groupId);
  if (group.isPending) return <p className="muted">Loading…</p>;
  if (group.isError) return <ErrorBox error={group.error} title={`Cannot load group ${groupId}`} />;
  const data = group.data;
  return (
    <section>
      <p className="crumbs">
        <Link to="/groups">Run groups</Link>
      </p>
      <div className="page-head">
        <h1>{data.name}</h1>
        <span className="muted">
          {data.kind === "sweep" ? `a ${data.recipe} sweep` : "grouped by hand"} in {data.project.team.slug}/
          {data.project.name}, by {data.created_by}, {formatDateTime(data.created_at)}
        </span>
      </div>
      <p data-testid="group-varies">
        {describeSweep(data)} ·{" "}
        every point as{" "}
        <a href={`/api/v1/groups/${data.id}/export`} download data-testid="group-export">
          CSV
        </a>{" "}
        or{" "}
        <a href={`/api/v1/groups/${data.id}/export?format=parquet`} download data-testid="group-export-parquet">
          Parquet
        </a>
        , per-run summaries as{" "}
        <a href={`/api/v1/groups/${data.id}/export?table=summaries`} download data-testid="group-export-summaries">
          CSV
        </a>{" "}
        or{" "}
        <a href={`/api/v1/groups/${data.id}/export?table=summaries&format=parquet`} download>
          Parquet
        </a>{" "}
        · <Link to={`/compare?group=${data.id}`} data-testid="group-overlay">Overlay runs</Link>
      </p>
      <table className="table" data-testid="group-runs">
        <thead>
          <tr>
            <th className="num">id</th>
            <th>name</th>
            <th>status</th>
          </tr>
        </thead>
        <tbody>
          {data.runs.map((run) => (
            <tr key={run.id}>
              <td className="num">{run.id}</td>
              <td>
                <Link to={`/runs/${run.id}`}>{run.name}</Link>
              </td>
              <td>
                <StatusBadge status={run.status} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {data.runs.length > 0 ? <StatsPanel group={data} /> : null}
      {data.runs.length > 0 ? <GroupDiagnostics groupId={data.id} /> : null}
    </section>
  );
}
