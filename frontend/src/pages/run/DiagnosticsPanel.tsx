import { useQuery } from "@tanstack/react-query";

import { apiRequest } from "../../api/client";
import { queryKeys } from "../../api/queryKeys";
import { ErrorBox } from "../../components/ErrorBox";
import {
  formatNumber,
  formatSeconds,
  formatShare,
  linePaths,
  stackedShares,
  STAVE_COLORS,
  stepSpans,
  toNum,
  type Diagnosis,
  type Num,
} from "./diagnostics";

function growth(value: Num | null): string {
  const g = toNum(value);
  return g === null ? "–" : `${g >= 0 ? "+" : ""}${formatShare(g)}`;
}

const W = 600;
const H = 120;

export function useDiagnosis(runId: number) {
  return useQuery({
    queryKey: queryKeys.diagnosis(runId),
    queryFn: ({ signal }) => apiRequest<Diagnosis>(`/runs/${runId}/diagnosis`, { signal }),
  });
}

/** The run's diagnosis: the barrel view, log-prob mismatch, off-policy, learning
 * signal and scorecard. Refetched when the server pushes diagnosis.updated. */
export function DiagnosticsPanel({ runId }: { runId: number }) {
  const diagnosis = useDiagnosis(runId);
  return (
    <details className="panel" open data-testid="diagnostics">
      <summary>Diagnostics</summary>
      {diagnosis.isPending ? (
        <p className="muted">Loading diagnosis…</p>
      ) : diagnosis.isError ? (
        <ErrorBox error={diagnosis.error} title="Cannot load the diagnosis" />
      ) : diagnosis.data.points_seen === 0 ? (
        <p className="muted" data-testid="diagnostics-empty">
          No diagnosis yet: it appears once the run reports time/, mismatch/, offpolicy/ or reward/ metrics.
        </p>
      ) : (
        <DiagnosisView runId={runId} d={diagnosis.data} />
      )}
    </details>
  );
}

function DiagnosisView({ runId, d }: { runId: number; d: Diagnosis }) {
  return (
    <div className="diagnostics">
      <p className="muted">
        {d.points_seen.toLocaleString("en-US")} points folded in, up to step {d.last_step ?? "–"}.
      </p>
      <BarrelSection d={d} />
      <MismatchSection runId={runId} d={d} />
      <OffpolicySection d={d} />
      <SignalSection d={d} />
      <ScorecardSection d={d} />
    </div>
  );
}

/** A stave's name in a table cell, beside its colour as the barrel chart draws it (shared with the group page). */
export function StaveCell({ name, kind }: { name: string; kind: string }) {
  return (
    <td>
      <span style={{ display: "inline-block", width: 10, height: 10, background: STAVE_COLORS[name] ?? "#888" }} /> {name}
      {kind === "idle" ? " (idle)" : ""}
    </td>
  );
}

function BarrelSection({ d }: { d: Diagnosis }) {
  const barrel = d.barrel;
  if (barrel.staves.length === 0) return null;
  const bars = stackedShares(barrel.chart);
  const width = bars.length ? W / bars.length : W;
  return (
    <section data-testid="barrel">
      <h3>Barrel: where a step's time goes</h3>
      {barrel.bounding ? (
        <p data-testid="bounding">
          Bounded by <strong>{barrel.bounding}</strong>
          {barrel.what_if
            ? `: were it twice as fast, a step would take ${formatSeconds(barrel.what_if.step_s)} instead of ${formatSeconds(barrel.step_s)} (×${formatNumber(barrel.what_if.speedup)}).`
            : "."}
        </p>
      ) : null}
      <svg viewBox={`0 0 ${W} ${H}`} width="100%" height={H} role="img" aria-label="stave shares per step">
        {bars.map((bar, i) =>
          bar.parts.map((p) => (
            <rect
              key={`${bar.step}-${p.name}`}
              x={i * width}
              width={Math.max(width - 0.5, 0.5)}
              y={H - (p.start + p.share) * H}
              height={p.share * H}
              fill={STAVE_COLORS[p.name] ?? "#888"}
            >
              <title>{`step ${bar.step}: ${p.name} ${formatShare(p.share)}`}</title>
            </rect>
          )),
        )}
      </svg>
      <table className="table">
        <thead>
          <tr>
            <th>stave</th>
            <th>mean</th>
            <th>share</th>
            <th>trend (s/step)</th>
            <th>last vs first tenth</th>
            <th>saved if 2× faster</th>
          </tr>
        </thead>
        <tbody>
          {barrel.staves.map((s) => (
            <tr key={s.name} className={s.name === barrel.bounding ? "bounding" : undefined}>
              <StaveCell name={s.name} kind={s.kind} />
              <td>{formatSeconds(s.mean_s)}</td>
              <td>{formatShare(s.share)}</td>
              <td>{formatNumber(s.slope_s_per_step)}</td>
              <td>{growth(s.growth)}</td>
              <td>{s.kind === "idle" ? "–" : formatSeconds(s.saved_if_2x_s)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function MismatchSection({ runId, d }: { runId: number; d: Diagnosis }) {
  const m = d.mismatch;
  if (m.engine_kl_mean === null && m.lag_kl_mean === null) return null;
  const { steps, engine_kl, lag_kl } = m.chart;
  const all = [...engine_kl, ...lag_kl].map(toNum).filter((v): v is number => v !== null && v > 0);
  const range = all.length ? { min: Math.min(...all), max: Math.max(...all) } : {};
  return (
    <section data-testid="mismatch">
      <h3>Log-prob mismatch</h3>
      <p>
        engine_kl {formatNumber(m.engine_kl_mean)} vs lag_kl {formatNumber(m.lag_kl_mean)}
        {m.attributed_to ? (
          <>
            {" "}
            — mostly <strong>{m.attributed_to === "engine" ? "the engine (rollout vs trainer numerics)" : "lag (staleness)"}</strong>{" "}
            ({formatShare(m.engine_share)} engine)
          </>
        ) : null}
      </p>
      <svg viewBox={`0 0 ${W} ${H}`} width="100%" height={H} role="img" aria-label="engine_kl and lag_kl over steps">
        {linePaths(steps, engine_kl, W, H, { log: true, ...range }).map((p) => (
          <polyline key={`e${p}`} points={p} fill="none" stroke="#e15759" strokeWidth={1.5} />
        ))}
        {linePaths(steps, lag_kl, W, H, { log: true, ...range }).map((p) => (
          <polyline key={`l${p}`} points={p} fill="none" stroke="#4e79a7" strokeWidth={1.5} />
        ))}
      </svg>
      <p className="muted">red: engine_kl, blue: lag_kl (log scale)</p>
      {m.flagged ? (
        <p className="warning" data-testid="mismatch-flags">
          Engine mismatch above {formatNumber(m.threshold)} or spiking at steps{" "}
          {stepSpans(m.flags.map((f) => f.step)).map((span, i) => (
            <span key={span.first}>
              {i > 0 ? ", " : ""}
              <a href={`/runs/${runId}?step=${span.first}`}>
                {span.first === span.last ? span.first : `${span.first}–${span.last}`}
              </a>
            </span>
          ))}
          : a refit or inference bug, or a lower-precision engine.
        </p>
      ) : null}
      {m.by_staleness.length ? (
        <table className="table">
          <thead>
            <tr>
              <th>staleness</th>
              <th>steps</th>
              <th>engine_kl</th>
              <th>lag_kl</th>
            </tr>
          </thead>
          <tbody>
            {m.by_staleness.map((b) => (
              <tr key={b.staleness}>
                <td>{b.staleness}</td>
                <td>{b.steps}</td>
                <td>{formatNumber(b.engine_kl)}</td>
                <td>{formatNumber(b.lag_kl)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

function OffpolicySection({ d }: { d: Diagnosis }) {
  const o = d.offpolicy;
  if (o.stats.length === 0) return null;
  return (
    <section data-testid="offpolicy">
      <h3>Off-policy</h3>
      <table className="table">
        <thead>
          <tr>
            <th>metric</th>
            <th>mean</th>
            <th>min</th>
            <th>max</th>
            <th>last</th>
          </tr>
        </thead>
        <tbody>
          {o.stats.map((s) => (
            <tr key={s.key}>
              <td>{s.key}</td>
              <td>{formatNumber(s.mean)}</td>
              <td>{formatNumber(s.min)}</td>
              <td>{formatNumber(s.max)}</td>
              <td>{formatNumber(s.last)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {o.dropped_groups !== null ? <p>Groups dropped as too stale: {formatNumber(o.dropped_groups)}</p> : null}
    </section>
  );
}

function SignalSection({ d }: { d: Diagnosis }) {
  const s = d.signal;
  if (s.zero_std_frac_mean === null) return null;
  return (
    <section data-testid="signal">
      <h3>Learning signal</h3>
      <p>
        Groups without signal (zero_std_frac): {formatShare(s.zero_std_frac_mean)} over the run,{" "}
        {formatShare(s.zero_std_frac_trailing)} over the last {s.window_steps} steps
        {s.zero_adv_token_frac_mean !== null ? `; tokens with zero advantage ${formatShare(s.zero_adv_token_frac_mean)}` : ""}.
        Flagged above {formatShare(s.threshold)} over {s.window_steps} steps.
      </p>
      {s.flagged ? (
        <p className="warning" data-testid="signal-advice">
          {s.flagged_since !== null ? `Since step ${s.flagged_since}: ` : ""}
          {s.advice}
        </p>
      ) : null}
    </section>
  );
}

/** The scorecard's figures in reading order, each with its label and format (shared with the
 * group page, whose summary has these fields). */
export const SCORE_FIGURES: {
  field: "tokens_per_s" | "samples_per_s" | "goodput" | "wall_s" | "reward_gained" | "reward_per_cpu_hour" | "reward_per_gpu_hour";
  label: string;
  format: (value: Num | null | undefined) => string;
}[] = [
  { field: "tokens_per_s", label: "tokens/s", format: formatNumber },
  { field: "samples_per_s", label: "samples/s", format: formatNumber },
  { field: "goodput", label: "goodput (tokens with a learning signal)", format: formatShare },
  { field: "wall_s", label: "wall-clock (Σ step time)", format: formatSeconds },
  { field: "reward_gained", label: "reward gained (last vs first tenth)", format: formatNumber },
  { field: "reward_per_cpu_hour", label: "reward per CPU-hour", format: formatNumber },
  { field: "reward_per_gpu_hour", label: "reward per GPU-hour", format: formatNumber },
];

function ScorecardSection({ d }: { d: Diagnosis }) {
  const c = d.scorecard;
  const rows: [string, string][] = [
    ...SCORE_FIGURES.map(({ field, label, format }): [string, string] => [label, format(c[field])]),
    [
      `time to reward ${c.target_reward ?? "(no target set)"}`,
      c.time_to_target ? `${formatSeconds(c.time_to_target.wall_s)} (step ${c.time_to_target.step})` : "–",
    ],
    ...Object.entries(c.idle_share).map(([name, share]): [string, string] => [`idle: ${name}`, formatShare(share)]),
  ];
  return (
    <section data-testid="scorecard">
      <h3>Scorecard</h3>
      <table className="table">
        <tbody>
          {rows.map(([name, value]) => (
            <tr key={name}>
              <th>{name}</th>
              <td>{value}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
