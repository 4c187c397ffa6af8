import { memo, useEffect, useRef, useState } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

import { formatMetricValue } from "../../api/nonfinite";
import type { Series } from "../../api/metrics";
import {
  STEP_INCREMENTS,
  formatTicks,
  isRaw,
  latestValue,
  stepRange,
  toUplotData,
  unitOf,
  type ChartView,
  type StepMark,
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

/** Checkpoints and resumes as dashed vertical lines across the plot; a linked-to step solid. */
function drawMarks(plot: uPlot, marks: readonly StepMark[]): void {
  const { ctx, bbox } = plot;
  ctx.save();
  for (const mark of marks) {
    const x = Math.round(plot.valToPos(mark.step, "x", true));
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

function chartOptions(
  title: string,
  width: number,
  logScale: boolean,
  onXScale: (plot: uPlot) => void,
  marks: () => readonly StepMark[],
): uPlot.Options {
  const unit = unitOf(title);
  return {
    width,
    height: HEIGHT,
    scales: {
      x: { time: false },
      y: yScale(logScale),
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
    hooks: {
      setScale: [(plot, scaleKey) => scaleKey === "x" && onXScale(plot)],
      draw: [(plot) => drawMarks(plot, marks())],
    },
    axes: [
      {
        stroke: "#555",
        font: AXIS_FONT,
        grid: { stroke: "#eee" },
        ticks: { stroke: "#ddd" },
        incrs: STEP_INCREMENTS,
        values: (_u, splits) => formatTicks(splits),
        label: "step",
        labelSize: 18,
        labelFont: AXIS_FONT,
      },
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
  /** Checkpoints and resumes, drawn on the step axis. */
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
function MetricChartImpl({ metricKey, series, view, marks = NO_MARKS, fetchRange, pinned = false, onPin }: MetricChartProps) {
  const containerRef = useRef<HTMLDivElement>(null);
  const plotRef = useRef<uPlot | null>(null);
  const zoomRef = useRef<Zoom | null>(null);
  // Set while this component itself changes the plot's data, whose scale change is not a zoom.
  const applyingRef = useRef(false);
  const latest = useRef({ series, view, marks, fetchRange });
  latest.current = { series, view, marks, fetchRange };
  const [zoom, setZoom] = useState<Zoom | null>(null);

  const apply = (plot: uPlot, shown: Series, resetScales: boolean) => {
    applyingRef.current = true;
    try {
      plot.setData(toUplotData(shown, latest.current.view), resetScales);
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
      const full = latest.current.series.step;
      const range = stepRange(p.scales.x?.min, p.scales.x?.max);
      const zoomed = range !== null && full.length > 0 && (range[0] > full[0]! || range[1] < full[full.length - 1]!);
      if (!zoomed) {
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
      chartOptions(metricKey, width, view.logScale, onXScale, () => latest.current.marks),
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
    // A log axis is a different chart (uPlot fixes a scale's distribution when it creates it);
    // smoothing is only new data.
  }, [metricKey, view.logScale]);
  const unzoomRef = useRef<(() => void) | null>(null);

  useEffect(() => {
    const plot = plotRef.current;
    if (!plot) return;
    const current = zoomRef.current;
    if (current?.series) apply(plot, current.series, false);
    else apply(plot, series, current === null); // a zoomed view keeps its range as points arrive
  }, [series, metricKey, view]);

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
