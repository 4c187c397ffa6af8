import { memo, useEffect, useRef, useState } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

import { formatMetricValue } from "../../api/nonfinite";
import type { Series } from "../../api/metrics";
import {
  ELAPSED_INCREMENTS,
  STEP_INCREMENTS,
  formatElapsed,
  formatElapsedValue,
  formatTicks,
  isRaw,
  latestValue,
  plotted,
  unitOf,
  xOfStep,
  zoomSteps,
  type ChartView,
  type Plotted,
  type StepMark,
  type XAxis,
} from "./charts";
import { yScale } from "./scales";

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

const MARK_COLOURS: Record<StepMark["kind"], string> = {
  checkpoint: "rgba(0, 0, 0, 0.3)",
  resume: "#d55e00",
  focus: "#cc79a7",
};

/**
 * Checkpoints and resumes as dashed vertical lines across the plot; a linked-to step solid.
 * Marks are steps: `xOf` places one on the x axis (against time, at its step's time).
 */
function drawMarks(plot: uPlot, marks: readonly StepMark[], xOf: (step: number) => number | null): void {
  const { ctx, bbox } = plot;
  ctx.save();
  for (const mark of marks) {
    const at = xOf(mark.step);
    if (at === null) continue;
    const x = Math.round(plot.valToPos(at, "x", true));
    if (x < bbox.left || x > bbox.left + bbox.width) continue;
    const focus = mark.kind === "focus";
    ctx.lineWidth = Math.max(1, devicePixelRatio) * (focus ? 2 : 1);
    ctx.setLineDash(focus ? [] : [4 * devicePixelRatio, 3 * devicePixelRatio]);
    ctx.strokeStyle = MARK_COLOURS[mark.kind];
    ctx.beginPath();
    ctx.moveTo(x, bbox.top);
    ctx.lineTo(x, bbox.top + bbox.height);
    ctx.stroke();
  }
  ctx.restore();
}

/** A wall-clock time (epoch seconds) in local time, for the legend. */
function formatClock(seconds: number): string {
  return new Date(seconds * 1000).toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" });
}

/** The x axis: steps in whole numbers, elapsed time in s / min / h, or uPlot's local-time axis. */
function xAxisOptions(xAxis: XAxis): uPlot.Axis {
  const common = { stroke: "#555", font: AXIS_FONT, grid: { stroke: "#eee" }, ticks: { stroke: "#ddd" }, labelSize: 18, labelFont: AXIS_FONT };
  if (xAxis === "wall") return { ...common, label: "local time" };
  if (xAxis === "relative") {
    return { ...common, incrs: ELAPSED_INCREMENTS, values: (_u, splits) => formatElapsed(splits), label: "time since the run's first point" };
  }
  return { ...common, incrs: STEP_INCREMENTS, values: (_u, splits) => formatTicks(splits), label: "step" };
}

/** The x series of the legend: the step; against time, the time and the step of the point under the cursor. */
function xSeries(xAxis: XAxis, stepAt: (idx: number) => number | undefined): uPlot.Series {
  if (xAxis === "step") return { label: "step", value: (_u, v) => (v == null ? "–" : String(v)) };
  const format = xAxis === "wall" ? formatClock : formatElapsedValue;
  return {
    label: "time",
    value: (_u, v, _s, idx) => {
      if (v == null) return "–";
      const step = idx == null ? undefined : stepAt(idx);
      return step === undefined ? format(v) : `${format(v)} · step ${step}`;
    },
  };
}

function chartOptions(
  title: string,
  width: number,
  logScale: boolean,
  xAxis: XAxis,
  onXScale: (plot: uPlot) => void,
  marks: () => readonly StepMark[],
  shown: () => Plotted | null,
): uPlot.Options {
  const unit = unitOf(title);
  const xOf = (step: number) => (xAxis === "step" ? step : (() => {
    const map = shown()?.map;
    return map ? xOfStep(map, step) : null;
  })());
  return {
    width,
    height: HEIGHT,
    scales: {
      // Against the wall clock, uPlot's time scale (epoch seconds, local time ticks).
      x: { time: xAxis === "wall" },
      y: yScale(logScale),
    },
    legend: { show: true, live: true },
    cursor: { drag: { x: true, y: false } },
    series: [
      xSeries(xAxis, (idx) => shown()?.steps[idx]),
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
    hooks: {
      setScale: [(plot, scaleKey) => scaleKey === "x" && onXScale(plot)],
      draw: [(plot) => drawMarks(plot, marks(), xOf)],
    },
    axes: [
      xAxisOptions(xAxis),
      {
        stroke: "#555",
        font: AXIS_FONT,
        grid: { stroke: "#eee" },
        ticks: { stroke: "#ddd" },
        size: labelWidth,
        ...(unit ? { label: unit, labelSize: 18, labelFont: AXIS_FONT } : {}),
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
  /** Against relative time: the run's first point's wall time (epoch seconds), time 0 of every chart. */
  origin?: number | null;
  /** Checkpoints and resumes, drawn at their steps (against time, at their steps' times). */
  marks?: readonly StepMark[];
  /** The series over [start, end] at full resolution (finer buckets, or raw points): asked for on zoom. */
  fetchRange?: (key: string, start: number, end: number, signal: AbortSignal) => Promise<Series>;
  /** Pinned to the top of the page; a pin button when `onPin` is given. */
  pinned?: boolean;
  onPin?: (key: string) => void;
}

const NO_MARKS: readonly StepMark[] = [];
/** Wait for the drag to settle before asking the server for the zoomed range. */
const ZOOM_FETCH_DELAY_MS = 150;

interface Zoom {
  start: number;
  end: number;
  /** The range's own series, once fetched; the overview's buckets until then. */
  series: Series | null;
}

/**
 * One uPlot chart per metric key. The chart is created once when the component mounts; new
 * data (live points, refetches) goes in via setData.
 *
 * Zoom (drag across the chart) asks the server for the zoomed range at full resolution, down to
 * raw points, and shows that until the zoom is reset (double click, or the reset button); live
 * points keep arriving in the overview meanwhile.
 */
function MetricChartImpl({
  metricKey,
  series,
  view,
  origin = null,
  marks = NO_MARKS,
  fetchRange,
  pinned = false,
  onPin,
}: MetricChartProps) {
  const containerRef = useRef<HTMLDivElement>(null);
  const plotRef = useRef<uPlot | null>(null);
  const zoomRef = useRef<Zoom | null>(null);
  // What the plot shows: its x values' steps (legend), and the step → x map (marks, zoom).
  const shownRef = useRef<Plotted | null>(null);
  // Set while this component itself changes the plot's data, whose scale change is not a zoom.
  const applyingRef = useRef(false);
  const latest = useRef({ series, view, origin, marks, fetchRange });
  latest.current = { series, view, origin, marks, fetchRange };
  const [zoom, setZoom] = useState<Zoom | null>(null);

  const apply = (plot: uPlot, shown: Series, resetScales: boolean) => {
    applyingRef.current = true;
    try {
      const next = plotted(shown, latest.current.view, latest.current.origin);
      shownRef.current = next;
      plot.setData(next.data, resetScales);
    } finally {
      applyingRef.current = false;
    }
  };

  // Create the chart once, empty; the effect below feeds it.
  useEffect(() => {
    const container = containerRef.current;
    if (!container) return;
    const width = Math.max(200, container.clientWidth);
    let timer: number | undefined;
    let inFlight: AbortController | null = null;
    const unzoom = () => {
      window.clearTimeout(timer);
      inFlight?.abort();
      zoomRef.current = null;
      setZoom(null);
      apply(plot, latest.current.series, true);
    };
    const onXScale = (p: uPlot) => {
      if (applyingRef.current) return;
      const { min, max } = p.scales.x ?? {};
      const { origin: o, series: overview } = latest.current;
      const range = zoomSteps(overview, shownRef.current?.map ?? null, view.xAxis, o, min, max);
      if (range === null) {
        if (zoomRef.current && !zoomRef.current.series) unzoom();
        return;
      }
      const previous = zoomRef.current;
      if (previous && previous.start === range[0] && previous.end === range[1]) return;
      zoomRef.current = { start: range[0], end: range[1], series: null };
      setZoom(zoomRef.current);
      const fetch = latest.current.fetchRange;
      if (!fetch) return;
      window.clearTimeout(timer);
      timer = window.setTimeout(() => {
        inFlight?.abort();
        const controller = new AbortController();
        inFlight = controller;
        const [start, end] = range;
        fetch(metricKey, start, end, controller.signal)
          .then((fine) => {
            const now = zoomRef.current;
            if (controller.signal.aborted || !now || now.start !== start || now.end !== end) return;
            zoomRef.current = { ...now, series: fine };
            setZoom(zoomRef.current);
            apply(plot, fine, false);
          })
          .catch(() => undefined); // the overview's buckets stay; the next zoom asks again
      }, ZOOM_FETCH_DELAY_MS);
    };
    const plot = new uPlot(
      chartOptions(metricKey, width, view.logScale, view.xAxis, onXScale, () => latest.current.marks, () => shownRef.current),
      [[], [], [], [], []],
      container,
    );
    plotRef.current = plot;
    zoomRef.current = null;
    setZoom(null);
    // uPlot's double click resets to the extent of the data shown: the zoomed range's own.
    const onDoubleClick = () => zoomRef.current && unzoom();
    plot.over.addEventListener("dblclick", onDoubleClick);
    unzoomRef.current = unzoom;
    const resize = new ResizeObserver(() => {
      const next = Math.max(200, container.clientWidth);
      if (next !== plot.width) plot.setSize({ width: next, height: HEIGHT });
    });
    resize.observe(container);
    return () => {
      window.clearTimeout(timer);
      inFlight?.abort();
      resize.disconnect();
      plot.over.removeEventListener("dblclick", onDoubleClick);
      plot.destroy();
      plotRef.current = null;
      unzoomRef.current = null;
    };
    // A log axis is a different chart (uPlot fixes a scale's distribution when it creates it), and
    // so is a time axis (its scale, ticks and legend); smoothing is only new data.
  }, [metricKey, view.logScale, view.xAxis]);
  const unzoomRef = useRef<(() => void) | null>(null);

  useEffect(() => {
    const plot = plotRef.current;
    if (!plot) return;
    const current = zoomRef.current;
    if (current?.series) apply(plot, current.series, false);
    else apply(plot, series, current === null); // a zoomed view keeps its range as points arrive
  }, [series, metricKey, view, origin]);

  useEffect(() => {
    plotRef.current?.redraw(false, false);
  }, [marks]);

  const last = latestValue(series);
  const shown = zoom?.series;
  return (
    <figure className="chart" data-testid={`chart-${metricKey}`}>
      <figcaption className="chart-head">
        <span className="chart-key" title={metricKey}>
          {onPin ? (
            <button
              type="button"
              className={`pin-button${pinned ? " pinned" : ""}`}
              aria-pressed={pinned}
              aria-label={`${pinned ? "unpin" : "pin"} ${metricKey}`}
              title={pinned ? "Unpin (this project's runs show it at the top)" : "Pin to the top for every run of this project"}
              onClick={() => onPin(metricKey)}
            >
              {pinned ? "★" : "☆"}
            </button>
          ) : null}
          {metricKey}
        </span>
        <span className="chart-stats num">
          {zoom ? (
            <>
              steps {zoom.start}–{zoom.end}:{" "}
              <span data-testid={`zoom-${metricKey}`}>
                {shown ? `${shown.step.length} pts${isRaw(shown) ? " (raw)" : ` of ${shown.count}`}` : "loading…"}
              </span>{" "}
              <button type="button" className="link-button" onClick={() => unzoomRef.current?.()}>
                reset zoom
              </button>
            </>
          ) : (
            <>
              last {formatMetricValue(last)} ·{" "}
              <span data-testid={`points-${metricKey}`}>{series.step.length}</span> pts
              {isRaw(series) ? "" : ` (${series.count} raw)`}
            </>
          )}
        </span>
      </figcaption>
      <div ref={containerRef} className="chart-plot" />
    </figure>
  );
}

/** Memoised: a live batch for one key re-renders only that key's chart. */
export const MetricChart = memo(MetricChartImpl);
