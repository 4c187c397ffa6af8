import { memo, useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

import { formatMetricValue } from "../../api/nonfinite";
import type { Series } from "../../api/metrics";
import {
  STEP_INCREMENTS,
  flatRange,
  formatTicks,
  isRaw,
  isZoomedX,
  latestValue,
  toUplotData,
  type ChartView,
} from "./charts";

const HEIGHT = 170;
const LINE = "#1f5fbf";
const LINE_RAW = "rgba(31, 95, 191, 0.35)"; // the unsmoothed mean, under the smoothed line
const BAND = "rgba(31, 95, 191, 0.16)";

const AXIS_FONT = "12px system-ui, sans-serif";

/** The y axis as wide as its longest label ("1.3732e-1" does not fit a fixed width). */
function labelWidth(plot: uPlot, values: string[] | null): number {
  const longest = (values ?? []).reduce((a, b) => (b.length > a.length ? b : a), "");
  plot.ctx.font = AXIS_FONT; // CSS pixels: uPlot sets its own (scaled) font before it draws
  return Math.max(40, Math.ceil(plot.ctx.measureText(longest).width) + 22); // + tick and gap
}

function chartOptions(title: string, width: number, logScale: boolean, onXScale: (plot: uPlot) => void): uPlot.Options {
  return {
    width,
    height: HEIGHT,
    scales: {
      x: { time: false },
      // uPlot's default ranging (10% padding, soft zero), unless the data is flat; on a log
      // axis, whole decades.
      y: logScale
        ? { distr: 3, log: 10 }
        : {
            range: (_u, min, max) =>
              min == null || max == null ? [null, null] : (flatRange(min, max) ?? uPlot.rangeNum(min, max, 0.1, true)),
          },
    },
    legend: { show: true, live: true },
    cursor: { drag: { x: true, y: false } },
    series: [
      { label: "step", value: (_u, v) => (v == null ? "–" : String(v)) },
      {
        label: title.includes("/") ? "mean" : title,
        stroke: LINE_RAW,
        width: 1,
        spanGaps: false,
        value: (_u, v) => formatMetricValue(v),
      },
      // min and max are drawn only as the band between them.
      { label: "min", stroke: "transparent", points: { show: false }, value: (_u, v) => formatMetricValue(v) },
      { label: "max", stroke: "transparent", points: { show: false }, value: (_u, v) => formatMetricValue(v) },
      // The smoothed mean (the mean itself when smoothing is off), drawn over the faint raw line.
      { label: "smoothed", stroke: LINE, width: 1.5, spanGaps: false, value: (_u, v) => formatMetricValue(v) },
    ],
    bands: [{ series: [3, 2], fill: BAND }],
    hooks: { setScale: [(plot, scaleKey) => scaleKey === "x" && onXScale(plot)] },
    axes: [
      {
        stroke: "#555",
        font: AXIS_FONT,
        grid: { stroke: "#eee" },
        ticks: { stroke: "#ddd" },
        incrs: STEP_INCREMENTS,
        values: (_u, splits) => formatTicks(splits),
      },
      {
        stroke: "#555",
        font: AXIS_FONT,
        grid: { stroke: "#eee" },
        ticks: { stroke: "#ddd" },
        size: labelWidth,
        // A log axis labels its decades as uPlot does; a linear one with just enough digits.
        ...(logScale ? {} : { values: (_u: uPlot, splits: number[]) => formatTicks(splits) }),
      },
    ],
  };
}

interface MetricChartProps {
  metricKey: string;
  series: Series;
  view: ChartView;
}

/**
 * One uPlot chart per metric key. The chart is created once when the
 * component mounts; new data (live points, refetches) goes in via setData.
 */
function MetricChartImpl({ metricKey, series, view }: MetricChartProps) {
  const containerRef = useRef<HTMLDivElement>(null);
  const plotRef = useRef<uPlot | null>(null);
  const zoomedRef = useRef(false);

  // Create the chart once, empty; the effect below feeds it.
  useEffect(() => {
    const container = containerRef.current;
    if (!container) return;
    const width = Math.max(200, container.clientWidth);
    const onXScale = (plot: uPlot) => {
      zoomedRef.current = isZoomedX(plot);
    };
    const plot = new uPlot(chartOptions(metricKey, width, view.logScale, onXScale), [[], [], [], [], []], container);
    plotRef.current = plot;
    zoomedRef.current = false;
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
    // A log axis is a different chart (uPlot fixes a scale's distribution when it creates it);
    // smoothing is only new data.
  }, [metricKey, view.logScale]);

  useEffect(() => {
    // Rescale to the new data unless the user is looking at a zoomed range.
    plotRef.current?.setData(toUplotData(series, view), !zoomedRef.current);
  }, [series, metricKey, view]);

  const latest = latestValue(series);
  return (
    <figure className="chart" data-testid={`chart-${metricKey}`}>
      <figcaption className="chart-head">
        <span className="chart-key" title={metricKey}>
          {metricKey}
        </span>
        <span className="chart-stats num">
          last {formatMetricValue(latest)} ·{" "}
          <span data-testid={`points-${metricKey}`}>{series.step.length}</span> pts
          {isRaw(series) ? "" : ` (${series.count} raw)`}
        </span>
      </figcaption>
      <div ref={containerRef} className="chart-plot" />
    </figure>
  );
}

/** Memoised: a live batch for one key re-renders only that key's chart. */
export const MetricChart = memo(MetricChartImpl);
