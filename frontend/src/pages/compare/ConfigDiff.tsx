import { memo, useState } from "react";

import type { RunDetail } from "../../api/types";
import { configPanel } from "../run/config";
import { diffConfigs } from "./config";

/** Two runs' configs side by side, only where they differ (an external run's MLflow params stand in for its config). */
function ConfigDiffPanel({ runs }: { runs: readonly RunDetail[] }) {
  const [leftId, setLeftId] = useState(runs[0]?.id ?? 0);
  const [rightId, setRightId] = useState(runs[1]?.id ?? 0);
  if (runs.length < 2) return null;
  const left = runs.find((run) => run.id === leftId) ?? runs[0];
  const right = runs.find((run) => run.id === rightId) ?? runs[1];
  if (!left || !right) return null;
  const rows = diffConfigs(configPanel(left).value, configPanel(right).value);
  const picker = (value: number, onChange: (id: number) => void, label: string) => (
    <select value={value} onChange={(e) => onChange(Number(e.target.value))} aria-label={label} data-testid={`diff-${label}`}>
      {runs.map((run) => (
        <option key={run.id} value={run.id}>
          #{run.id} {run.name}
        </option>
      ))}
    </select>
  );
  return (
    <section className="panel compare-below" data-testid="config-diff">
      <div className="section-head">
        <h2>Config diff</h2>
        {picker(left.id, setLeftId, "left")}
        <button
          type="button"
          aria-label="Swap the two runs"
          onClick={() => {
            setLeftId(right.id);
            setRightId(left.id);
          }}
        >
          ⇄
        </button>
        {picker(right.id, setRightId, "right")}
      </div>
      {left.id === right.id ? (
        <p className="muted">Pick two different runs.</p>
      ) : rows.length === 0 ? (
        <p className="muted">The two configs are the same.</p>
      ) : (
        <div className="table-scroll">
          <table className="table config-diff">
            <thead>
              <tr>
                <th>path ({rows.length} differ)</th>
                <th>#{left.id}</th>
                <th>#{right.id}</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((row) => (
                <tr key={row.path}>
                  <td>
                    <code>{row.path || "(whole config)"}</code>
                  </td>
                  <td className="wrap diff-left">
                    <code>{row.left}</code>
                  </td>
                  <td className="wrap diff-right">
                    <code>{row.right}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

/** What the diff shows of a run: a live batch gives a run a new object with these unchanged. */
function sameConfigs(a: { runs: readonly RunDetail[] }, b: { runs: readonly RunDetail[] }): boolean {
  return (
    a.runs.length === b.runs.length &&
    a.runs.every((run, i) => {
      const other = b.runs[i];
      return (
        other !== undefined &&
        run.id === other.id &&
        run.name === other.name &&
        run.recipe === other.recipe &&
        run.config === other.config &&
        run.params === other.params
      );
    })
  );
}

/** Two runs' configs side by side, only where they differ; not re-rendered by live points. */
export const ConfigDiff = memo(ConfigDiffPanel, sameConfigs);
