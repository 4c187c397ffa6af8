import { useState } from "react";

import { useCompareStats, useMetricKeys } from "../../api/hooks";
import type { CompareStats, CompareSummaryKind, RunGroupDetail } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { formatFigure, formatInterval } from "./format";

const SUMMARIES: { value: CompareSummaryKind; label: string }[] = [
  { value: "final", label: "final (mean of the last 10 % of steps)" },
  { value: "best", label: "best" },
  { value: "auc", label: "area under the curve (mean height)" },
  { value: "at_step", label: "at a step" },
];

/**
 * Whether the group's configs differ on a metric: the runs split by a config field (a sweep's
 * grid fields are offered), a tag prefix (tag:seed) or an MLflow param (param:lr), each part
 * with its mean, IQM and intervals, each tested against a baseline, with the answer in a
 * sentence. Asked with a button: the server bootstraps 10,000 times per group.
 */
export function StatsPanel({ group }: { group: RunGroupDetail }) {
  const gridFields = Object.keys((group.grid ?? {}) as Record<string, unknown>);
  const keys = useMetricKeys(group.runs[0]?.id ?? -1);
  const metricNames = (keys.data?.keys ?? []).map((key) => key.key);
  const [metric, setMetric] = useState("");
  const [summary, setSummary] = useState<CompareSummaryKind>("final");
  const [step, setStep] = useState("");
  const [groupBy, setGroupBy] = useState(gridFields[0] ?? "");
  const [baseline, setBaseline] = useState("");
  const [higherIsBetter, setHigherIsBetter] = useState(true);
  const stats = useCompareStats();
  const chosenMetric = metric || (metricNames.includes("reward/mean") ? "reward/mean" : (metricNames[0] ?? ""));

  function compare(nextBaseline = baseline) {
    stats.mutate({
      metric: chosenMetric,
      summary,
      final_fraction: 0.1,
      higher_is_better: higherIsBetter,
      rounds: 10_000,
      runs: group.runs.map((run) => run.id),
      group_by: groupBy,
      ...(summary === "at_step" && step !== "" ? { step: Number(step) } : {}),
      ...(nextBaseline ? { baseline: nextBaseline } : {}),
    });
  }

  return (
    <section className="panel" data-testid="stats-panel">
      <h2>Is the difference real?</h2>
      <form
        className="stats-form"
        onSubmit={(event) => {
          event.preventDefault();
          compare();
        }}
      >
        <label>
          metric{" "}
          {metricNames.length > 0 ? (
            <select value={chosenMetric} onChange={(e) => setMetric(e.target.value)} data-testid="stats-metric">
              {metricNames.map((name) => (
                <option key={name}>{name}</option>
              ))}
            </select>
          ) : (
            <input value={metric} onChange={(e) => setMetric(e.target.value)} data-testid="stats-metric" />
          )}
        </label>
        <label>
          each run's{" "}
          <select
            value={summary}
            onChange={(e) => setSummary(e.target.value as CompareSummaryKind)}
            data-testid="stats-summary"
          >
            {SUMMARIES.map((s) => (
              <option key={s.value} value={s.value}>
                {s.label}
              </option>
            ))}
          </select>
        </label>
        {summary === "at_step" ? (
          <label>
            step{" "}
            <input inputMode="numeric" value={step} onChange={(e) => setStep(e.target.value)} data-testid="stats-step" />
          </label>
        ) : null}
        <label title="A config field (optim.lr), a tag prefix (tag:seed, for tags seed:1, seed:2…) or an MLflow param (param:lr)">
          split by{" "}
          {gridFields.length > 0 ? (
            <select value={groupBy} onChange={(e) => setGroupBy(e.target.value)} data-testid="stats-group-by">
              {gridFields.map((field) => (
                <option key={field}>{field}</option>
              ))}
            </select>
          ) : (
            <input
              value={groupBy}
              placeholder="optim.lr, tag:seed or param:lr"
              onChange={(e) => setGroupBy(e.target.value)}
              data-testid="stats-group-by"
            />
          )}
        </label>
        <label>
          <input type="checkbox" checked={higherIsBetter} onChange={(e) => setHigherIsBetter(e.target.checked)} />{" "}
          higher is better
        </label>
        <button type="submit" className="primary" disabled={stats.isPending || !chosenMetric || !groupBy}>
          {stats.isPending ? "Computing…" : "Compare"}
        </button>
      </form>
      {stats.isError ? <ErrorBox error={stats.error} title="Cannot compare" /> : null}
      {stats.data ? (
        <StatsResult
          result={stats.data}
          onBaseline={(name) => {
            setBaseline(name);
            compare(name);
          }}
        />
      ) : null}
    </section>
  );
}

function StatsResult({ result, onBaseline }: { result: CompareStats; onBaseline: (name: string) => void }) {
  const baseline = result.comparisons[0]?.baseline ?? result.groups[0]?.name;
  return (
    <>
      <table className="table" data-testid="stats-groups">
        <thead>
          <tr>
            <th>group</th>
            <th className="num">runs</th>
            <th className="num">mean</th>
            <th>95 % interval (t)</th>
            <th className="num">IQM</th>
            <th>95 % interval of IQM (bootstrap)</th>
            <th className="num">std</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {result.groups.map((group) => (
            <tr key={group.name} data-testid={`stats-group-${group.name}`}>
              <td>{group.name}</td>
              <td className="num" title={group.missing.length ? `without ${result.metric}: ${group.missing.join(", ")}` : ""}>
                {group.summary?.n ?? 0}
                {group.missing.length ? ` (+${group.missing.length} without)` : ""}
              </td>
              <td className="num">{formatFigure(group.summary?.mean)}</td>
              <td>{formatInterval(group.summary?.t_interval)}</td>
              <td className="num">{formatFigure(group.summary?.iqm)}</td>
              <td>{formatInterval(group.summary?.bootstrap_iqm)}</td>
              <td className="num">{formatFigure(group.summary?.std)}</td>
              <td>
                {group.name === baseline ? (
                  <span className="muted small">baseline</span>
                ) : (
                  <button type="button" className="link-button" onClick={() => onBaseline(group.name)}>
                    make baseline
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <ul className="verdicts" data-testid="stats-verdicts">
        {result.comparisons.map((comparison) => (
          <li key={comparison.group} data-testid={`verdict-${comparison.group}`}>
            <strong>{comparison.verdict}</strong>
            {comparison.result ? (
              <span className="muted small">
                {" "}
                Bootstrap interval {formatInterval(comparison.result.bootstrap_interval)}; P(a run beats one of{" "}
                {comparison.baseline}) = {formatFigure(comparison.result.probability_of_improvement)}; effect size{" "}
                {formatFigure(comparison.result.effect_size)}
                {comparison.result.seeds_needed !== null
                  ? `; ${comparison.result.seeds_needed} seeds per group detect a difference of ${formatFigure(comparison.result.min_effect)} with power 0.8`
                  : ""}
                .
              </span>
            ) : null}
            {comparison.result?.warnings.map((warning) => (
              <div key={warning} className="warning small">
                ⚠ {warning}
              </div>
            ))}
          </li>
        ))}
      </ul>
    </>
  );
}
