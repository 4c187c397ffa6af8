import { memo, useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

import type { Series } from "../../api/metrics";
import { formatMetricValue } from "../../api/nonfinite";
import { STEP_INCREMENTS, distributionData, formatTicks, unitOf, type Distribution } from "./charts";
import { yScale } from "./scales";

const HEIGHT = 170;
const AXIS_FONT = "12px system-ui, sans-serif";
const LINE = "#1f5fbf";
const OUTER = "rgba(31, 95, 191, 0.10)";
const INNER = "rgba(31, 95, 191, 0.24)";

function options(d: Distribution, width: number, logScale: boolean): uPlot.Options {
  const value = (_u: uPlot, v: number | null) => formatMetricValue(v);
  const edge = (label: string): uPlot.Series => ({ label, stroke: "transparent", points: { show: false }, value });
  const axis = { stroke: "#555", font: AXIS_FONT, labelFont: AXIS_FONT, labelSize: 18, grid: { stroke: "#eee" }, ticks: { stroke: "#ddd" } };
  const unit = unitOf(d.centre);
  const bands: uPlot.Band[] = [];
  if (d.outer) bands.push({ series: [5, 1], fill: OUTER });
  if (d.inner) bands.push({ series: [4, 2], fill: INNER });
  return {
    width,
    height: HEIGHT,
    scales: { x: { time: false }, y: yScale(logScale) },
    legend: { show: true, live: true },
    cursor: { drag: { x: true, y: false } },
    series: [
      { label: "step", value: (_u, v) => (v == null ? "–" : String(v)) },
      edge("min"),
      edge("p10"),
      { label: d.centre.slice(d.centre.indexOf("/") + 1), stroke: LINE, width: 1.5, spanGaps: false, value },
      edge("p90"),
      edge("max"),
    ],
    bands,
    axes: [
      { ...axis, incrs: STEP_INCREMENTS, values: (_u, splits) => formatTicks(splits), label: "step" },
      { ...axis, size: 60, ...(unit ? { label: unit } : { labelSize: 0 }), ...(logScale ? {} : { values: (_u: uPlot, splits: number[]) => formatTicks(splits) }) },
    ],
  };
}

/**
 * A namespace's per-step distribution: the centre line in its p10–p90 band inside the min–max
 * band, from the summary keys the recipe logs (see distributionsOf). Created once; data goes in
 * with setData.
 */
function DistributionChartImpl({ d, series, logScale }: { d: Distribution; series: Readonly<Record<string, Series>>; logScale: boolean }) {
  const containerRef = useRef<HTMLDivElement>(null);
  const plotRef = useRef<uPlot | null>(null);

  useEffect(() => {
    const container = containerRef.current;
    if (!container) return;
    const plot = new uPlot(options(d, Math.max(200, container.clientWidth), logScale), [[], [], [], [], [], []], container);
    plotRef.current = plot;
    const resize = new ResizeObserver(() => {
      const next = Math.max(200, container.clientWidth);
      if (next !== plot.width) plot.setSize({ width: next, height: HEIGHT });
    });
    resize.observe(container);
    return () => {
      resize.disconnect();
      plot.destroy();
      plotRef.current = null;
    };
  }, [d.namespace, d.centre, logScale]);

  useEffect(() => {
    plotRef.current?.setData(distributionData(d, series));
  }, [d, series]);

  const parts = [d.inner ? "p10–p90" : null, d.outer ? "min–max" : null].filter(Boolean).join(" inside ");
  return (
    <figure className="chart distribution" data-testid={`distribution-${d.namespace}`}>
      <figcaption className="chart-head">
        <span className="chart-key">{d.namespace} distribution</span>
        <span className="chart-stats">
          {d.centre.slice(d.namespace.length + 1)} with {parts}
        </span>
      </figcaption>
      <div ref={containerRef} className="chart-plot" />
    </figure>
  );
}

export const DistributionChart = memo(DistributionChartImpl);
