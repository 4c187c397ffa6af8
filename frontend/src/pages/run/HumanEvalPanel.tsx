import { useEffect, useRef } from "react";
import { Link } from "react-router";
import uPlot from "uplot";

import { useMetricSeries, useRunHumanEval } from "../../api/hooks";
import { formatMetricValue } from "../../api/nonfinite";
import type { CheckpointScore, RunHumanEval } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { STEP_INCREMENTS, formatTicks } from "./charts";
import { PROXY_REWARD_KEY, finite, humanChartData, humanChartSeries } from "./human";

const HEIGHT = 220;
const HUMAN = "#b3541e"; // orange against the blue of the reward: apart for colour-blind eyes too
const REWARD = "#1f5fbf";
const HELD_OUT = "#5a6b7b";
const AXIS_FONT = "12px system-ui, sans-serif";

/** Each checkpoint's 95 % interval as a vertical bar with caps: its ci columns are 2 and 3. */
function drawIntervals(plot: uPlot): void {
  const [xs, , lows, highs] = plot.data;
  const { ctx } = plot;
  ctx.save();
  ctx.strokeStyle = HUMAN;
  ctx.lineWidth = 1.5 * uPlot.pxRatio;
  const cap = 4 * uPlot.pxRatio;
  xs.forEach((step, i) => {
    const low = lows?.[i];
    const high = highs?.[i];
    if (low == null || high == null) return;
    const x = plot.valToPos(step, "x", true);
    const y0 = plot.valToPos(low, "human", true);
    const y1 = plot.valToPos(high, "human", true);
    ctx.beginPath();
    ctx.moveTo(x, y0);
    ctx.lineTo(x, y1);
    ctx.moveTo(x - cap, y0);
    ctx.lineTo(x + cap, y0);
    ctx.moveTo(x - cap, y1);
    ctx.lineTo(x + cap, y1);
    ctx.stroke();
  });
  ctx.restore();
}

function axis(scale: string, label: string, side?: number): uPlot.Axis {
  return {
    scale,
    label,
    // uPlot places an axis by its index unless told; an explicit undefined would move it.
    ...(side === undefined ? {} : { side }),
    stroke: "#555",
    font: AXIS_FONT,
    labelFont: AXIS_FONT,
    grid: { show: side === undefined, stroke: "#eee" },
    ticks: { stroke: "#ddd" },
    size: 56,
    values: (_u, splits) => formatTicks(splits),
  };
}

function options(width: number, heldOutKey: string | null): uPlot.Options {
  const hidden = { stroke: "transparent", points: { show: false } };
  return {
    width,
    height: HEIGHT,
    scales: { x: { time: false }, human: { auto: true }, reward: { auto: true } },
    legend: { show: true, live: true },
    series: [
      { label: "step", value: (_u, v) => (v == null ? "–" : String(v)) },
      {
        label: "human score",
        scale: "human",
        stroke: HUMAN,
        width: 2,
        spanGaps: true,
        points: { show: true, size: 7, fill: HUMAN },
        value: (_u, v) => (v == null ? "–" : v.toFixed(0)),
      },
      { label: "95 % low", scale: "human", ...hidden, value: (_u, v) => (v == null ? "–" : v.toFixed(0)) },
      { label: "95 % high", scale: "human", ...hidden, value: (_u, v) => (v == null ? "–" : v.toFixed(0)) },
      { label: PROXY_REWARD_KEY, scale: "reward", stroke: REWARD, width: 1, spanGaps: true, value: (_u, v) => formatMetricValue(v) },
      {
        label: heldOutKey ?? "held-out eval",
        scale: "reward",
        stroke: HELD_OUT,
        width: 1.5,
        dash: [5, 4],
        spanGaps: true,
        show: heldOutKey !== null,
        value: (_u, v) => formatMetricValue(v),
      },
    ],
    hooks: { draw: [drawIntervals] },
    axes: [
      { ...axis("x", "step"), incrs: STEP_INCREMENTS, size: 40 },
      axis("human", "human score (Arena points)"),
      axis("reward", "reward", 1),
    ],
  };
}

/** The human score at each checkpoint, its 95 % interval, over the proxy reward and held-out eval. */
function HumanChart({ runId, human }: { runId: number; human: RunHumanEval }) {
  const containerRef = useRef<HTMLDivElement>(null);
  const plotRef = useRef<uPlot | null>(null);
  const metrics = useMetricSeries(runId);
  const { reward, heldOut, heldOutKey } = humanChartSeries(metrics.data);

  useEffect(() => {
    const container = containerRef.current;
    if (!container) return;
    const plot = new uPlot(options(Math.max(300, container.clientWidth), heldOutKey), [[], [], [], [], [], []], container);
    plotRef.current = plot;
    const resize = new ResizeObserver(() => {
      const next = Math.max(300, container.clientWidth);
      if (next !== plot.width) plot.setSize({ width: next, height: HEIGHT });
    });
    resize.observe(container);
    return () => {
      resize.disconnect();
      plot.destroy();
      plotRef.current = null;
    };
  }, [heldOutKey]);

  useEffect(() => {
    plotRef.current?.setData(humanChartData(human.checkpoints, reward, heldOut));
  }, [human, reward, heldOut, heldOutKey]);

  return <div ref={containerRef} className="chart-plot" data-testid="human-chart" />;
}

function interval(c: CheckpointScore): string {
  const [score, low, high] = [finite(c.score), finite(c.ci_low), finite(c.ci_high)];
  if (score === null) return "no votes yet";
  const bounds = low === null || high === null ? "" : ` [${low.toFixed(0)}, ${high.toFixed(0)}]`;
  return `${score.toFixed(0)}${bounds}`;
}

/** What people made of the run's checkpoints: shown once an eval has ranked them. */
export function HumanEvalPanel({ runId }: { runId: number }) {
  const human = useRunHumanEval(runId);
  if (human.isPending) return null;
  if (human.isError) return <ErrorBox error={human.error} title="Cannot load the human scores" />;
  const found = human.data;
  if (found.eval === null) return null;
  const { warning } = found;
  return (
    <section className="panel human-eval" data-testid="human-eval">
      <h2>
        Human score <span className="muted small">from eval </span>
        <Link to={`/evals/${found.eval.id}`}>{found.eval.name}</Link>{" "}
        <span className="muted small">
          ({found.eval.status.toLowerCase()}, {found.votes} votes; bars are 95 % bootstrap intervals)
        </span>
      </h2>
      {warning ? (
        <div className="hacking" role="alert" data-testid="hacking-warning">
          <strong>Reward hacking?</strong> {warning.message}
        </div>
      ) : null}
      <HumanChart runId={runId} human={found} />
      <table className="table" data-testid="human-table">
        <thead>
          <tr>
            <th className="num">step</th>
            <th>checkpoint</th>
            <th className="num">human score [95 %]</th>
            <th className="num">rank</th>
            <th className="num">votes</th>
            <th className="num">proxy reward</th>
          </tr>
        </thead>
        <tbody>
          {found.checkpoints.map((c) => {
            const flagged = warning !== null && (c.checkpoint === warning.earlier.checkpoint || c.checkpoint === warning.later.checkpoint);
            return (
              <tr key={c.checkpoint} className={flagged ? "flagged" : undefined}>
                <td className="num">{c.step}</td>
                <td>{c.label}</td>
                <td className="num">{interval(c)}</td>
                <td className="num">{c.rank ?? "–"}</td>
                <td className="num">{c.battles}</td>
                <td className="num">{formatMetricValue(finite(c.proxy_reward))}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </section>
  );
}
