import { useState } from "react";
import { Link } from "react-router";

import { useCheckpoints, useResumeRun } from "../../api/hooks";
import type { Checkpoint, RunDetail } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { formatDateTime } from "../../format";
import { finite } from "./human";
import { SampleBrowser } from "./SampleBrowser";
import { checkpointMetric, formatReward } from "./samples";

/** What the policy actually said, and what the reward made of it: a browser of the run's samples. */
export function SamplesPanel({ runId }: { runId: number }) {
  return <SampleBrowser runId={runId} />;
}

/** The checkpoint registry of one run, and resume for a run that stopped early. */
export function CheckpointsPanel({ run }: { run: RunDetail }) {
  const checkpoints = useCheckpoints(run.id);
  const resume = useResumeRun(run.id);
  const [chosen, setChosen] = useState<number | null>(null);
  if (checkpoints.isPending) return null;
  if (checkpoints.isError) return <ErrorBox error={checkpoints.error} title="Cannot load checkpoints" />;
  if (checkpoints.data.length === 0) return null;
  const resumable = run.status === "FAILED" || run.status === "CANCELLED";
  const target = checkpoints.data.find((c) => c.id === chosen) ?? checkpoints.data[0];
  const onResume = () => {
    if (target && window.confirm(`Resume run ${run.id} from the checkpoint at step ${target.step}?`)) {
      resume.mutate(target.id);
    }
  };
  return (
    <details className="panel" open={resumable} data-testid="checkpoints">
      <summary>Checkpoints ({checkpoints.data.length})</summary>
      {resumable ? (
        <p className="resume-row">
          <button type="button" onClick={onResume} disabled={resume.isPending} data-testid="resume-run">
            {resume.isPending ? "Resuming…" : `Resume from step ${target?.step ?? "–"}`}
          </button>
          <span className="muted"> a new attempt continues from the chosen checkpoint</span>
        </p>
      ) : null}
      {resume.isError ? <ErrorBox error={resume.error} title="Resume failed" /> : null}
      <table className="table">
        <thead>
          <tr>
            {resumable ? <th /> : null}
            <th className="num">step</th>
            <th className="num">version</th>
            <th className="num">reward/mean</th>
            <th className="num" title="Human score in the run's eval, with its 95 % interval">human</th>
            <th>where</th>
            <th>saved</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {checkpoints.data.map((c: Checkpoint) => (
            <tr key={c.id}>
              {resumable ? (
                <td>
                  <input
                    type="radio"
                    name="resume-from"
                    aria-label={`resume from step ${c.step}`}
                    checked={target?.id === c.id}
                    onChange={() => setChosen(c.id)}
                  />
                </td>
              ) : null}
              <td className="num">{c.step}</td>
              <td className="num">{c.weight_version ?? "–"}</td>
              <td className="num">{formatReward(checkpointMetric(c.metrics, "reward/mean"))}</td>
              <td className="num">{formatHuman(c)}</td>
              <td className="uri-cell">
                <code>{c.uri}</code>
              </td>
              <td className="num">{formatDateTime(c.created_at)}</td>
              <td>
                <Link to={`/chat?checkpoint=${c.id}`} data-testid={`chat-${c.step}`}>
                  chat
                </Link>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </details>
  );
}

/** A checkpoint's human score in the run's eval, rounded as Arena shows it. */
function formatHuman(c: Checkpoint): string {
  const score = finite(c.human?.score);
  return score === null ? "–" : score.toFixed(0);
}
