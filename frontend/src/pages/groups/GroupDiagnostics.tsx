import { useQuery } from "@tanstack/react-query";

import { apiRequest } from "../../api/client";
import { queryKeys } from "../../api/queryKeys";
import type { components } from "../../api/schema.gen";
import { ErrorBox } from "../../components/ErrorBox";
import { plural } from "../../format";
import { SCORE_FIGURES, StaveCell } from "../run/DiagnosticsPanel";
import { formatSeconds, formatShare } from "../run/diagnostics";

/** GET /api/v1/groups/{id}/scorecard. */
export type GroupScorecard = components["schemas"]["GroupScorecard"];

export function useGroupScorecard(groupId: number) {
  return useQuery({
    queryKey: [...queryKeys.group(groupId), "scorecard"] as const,
    queryFn: ({ signal }) => apiRequest<GroupScorecard>(`/groups/${groupId}/scorecard`, { signal }),
  });
}

/** "train bounds 2 of 3 runs", or why there is no bounding stave. */
export function describeGroupBounding(barrel: GroupScorecard["barrel"]): string {
  const of = plural(barrel.runs, "run");
  if (barrel.runs === 0) return "No run has reported its step times yet.";
  const left = barrel.runs_without_staves ? ` (${barrel.runs_without_staves} without step times left out)` : "";
  if (barrel.bounding === null) return `No stave bounds any of the ${of}${left}.`;
  return `Bounded by ${barrel.bounding}: it bounds ${barrel.bounded_runs} of the ${of}${left}.`;
}

/** The group's diagnostics: where its runs' steps go (their barrel views summarised) and
 * their scorecards' mean, min and max. */
export function GroupDiagnostics({ groupId }: { groupId: number }) {
  const scorecard = useGroupScorecard(groupId);
  let body = <p className="muted">Loading the runs' diagnoses…</p>;
  if (scorecard.isError) body = <ErrorBox error={scorecard.error} title="Cannot load the group's scorecard" />;
  else if (scorecard.isSuccess) body = <GroupDiagnosticsView data={scorecard.data} />;
  return (
    <details className="panel" open data-testid="group-diagnostics">
      <summary>Diagnostics</summary>
      {body}
    </details>
  );
}

/** A table's header: its columns, then its counts (right-aligned). */
function Head({ columns, counts }: { columns: string[]; counts: string[] }) {
  return (
    <thead>
      <tr>
        {columns.map((name) => (
          <th key={name}>{name}</th>
        ))}
        {counts.map((name) => (
          <th key={name} className="num">
            {name}
          </th>
        ))}
      </tr>
    </thead>
  );
}

function GroupDiagnosticsView({ data }: { data: GroupScorecard }) {
  const { barrel, summary } = data;
  return (
    <div className="diagnostics">
      <section data-testid="group-barrel">
        <h3>Barrel: where the runs' steps go</h3>
        <p data-testid="group-bounding">{describeGroupBounding(barrel)}</p>
        {barrel.staves.length ? (
          <table className="table">
            <Head columns={["stave", "mean", "mean share", "share min–max"]} counts={["runs bounded", "runs with it"]} />
            <tbody>
              {barrel.staves.map((s) => (
                <tr
                  key={s.name}
                  data-testid={`group-stave-${s.name}`}
                  className={s.name === barrel.bounding ? "bounding" : undefined}
                >
                  <StaveCell name={s.name} kind={s.kind} />
                  <td>{formatSeconds(s.mean_s)}</td>
                  <td>{formatShare(s.mean_share)}</td>
                  <td>
                    {formatShare(s.min_share)}–{formatShare(s.max_share)}
                  </td>
                  <td className="num">{s.bounds}</td>
                  <td className="num">{s.runs}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : null}
      </section>
      <section data-testid="group-scorecard">
        <h3>Scorecard over the runs</h3>
        <table className="table">
          <Head columns={["figure", "mean", "min", "max"]} counts={["runs"]} />
          <tbody>
            {[
              ...SCORE_FIGURES,
              {
                field: "time_to_target_s",
                label: `time to reward ${data.target_reward ?? "(no target set)"}`,
                format: formatSeconds,
              },
            ].map(({ field, label, format }) => {
              const figure = summary[field];
              return (
                <tr key={field} data-testid={`group-score-${field}`}>
                  <th>{label}</th>
                  <td>{format(figure?.mean)}</td>
                  <td>{format(figure?.min)}</td>
                  <td>{format(figure?.max)}</td>
                  <td className="num">{figure?.runs ?? 0}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </section>
    </div>
  );
}
