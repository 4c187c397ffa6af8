import { memo, useEffect, useRef, type ReactNode } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

import { formatMetricValue } from "../../api/nonfinite";
import { STEP_INCREMENTS, formatTicks } from "../run/charts";
import { yScale } from "../run/scales";
import type { StepRange } from "./api";
import { formatLogTick } from "./format";
import { chartDraws } from "./drawQueue";
import { definedRanges, hoverValues, type HoverStore } from "./hover";
import { withAlpha } from "./palette";

const HEIGHT = 220;
const AXIS_FONT = "12px system-ui, sans-serif";
const RUN_WIDTH = 1.25;
const GROUP_WIDTH = 2;
/** Past this many runs on a chart their lines are 1 px: pixel-aligned strokes draw the fastest. */
export const MANY_RUNS = 20;

/** A line's width (CSS px) on a chart of `count` entries of `kind`. */
export function lineWidth(kind: EntryKind, count: number): number {
  if (kind === "groups") return GROUP_WIDTH;
  return count > MANY_RUNS ? 1 : RUN_WIDTH;
}
/** Alpha of the lines that are not highlighted while one legend entry is hovered. */
const DIMMED = 0.12;
const BAND_ALPHA = 0.16;
/** A drag narrower than this (CSS px) is a click, not a zoom. */
const MIN_DRAG_PX = 4;

/** A line of the legend: a run, or a group of runs drawn as a mean and a band. */
export interface ChartEntry {
  id: string;
  label: string;
  colour: string;
}

export type EntryKind = "runs" | "groups";

function strideOf(kind: EntryKind): number {
  return kind === "runs" ? 1 : 3;
}

function labelWidth(plot: uPlot, values: string[] | null): number {
  const longest = (values ?? []).reduce((a, b) => (b.length > a.length ? b : a), "");
  plot.ctx.font = AXIS_FONT;
  return Math.max(40, Math.ceil(plot.ctx.measureText(longest).width) + 22);
}

interface Handlers {
  onZoom: (range: StepRange | null) => void;
  onHover: (plot: uPlot | null) => void;
}

/** uPlot options for one chart. Series: step, then per entry one line (runs) or mean, low, high (groups). */
export function chartOptions(
  metricKey: string,
  width: number,
  kind: EntryKind,
  entries: readonly ChartEntry[],
  hidden: ReadonlySet<string>,
  logScale: boolean,
  syncKey: string,
  handlers: Handlers,
): uPlot.Options {
  const series: uPlot.Series[] = [{ label: "step" }];
  const bands: uPlot.Band[] = [];
  const edges = new Set<number>();
  const line = lineWidth(kind, entries.length);
  for (const entry of entries) {
    const show = !hidden.has(entry.id);
    const value = (_u: uPlot, v: number | null) => formatMetricValue(v);
    if (kind === "runs") {
      series.push({ label: entry.label, stroke: entry.colour, width: line, spanGaps: false, show, value });
      continue;
    }
    const mean = series.length;
    series.push({ label: entry.label, stroke: entry.colour, width: line, spanGaps: false, show, value });
    series.push({ label: `${entry.label} low`, stroke: "transparent", points: { show: false }, show, value });
    series.push({ label: `${entry.label} high`, stroke: "transparent", points: { show: false }, show, value });
    edges.add(mean + 1).add(mean + 2);
    bands.push({ series: [mean + 2, mean + 1], fill: withAlpha(entry.colour, BAND_ALPHA) });
  }
  let draggedHere = false;
  const axis = { stroke: "#555", font: AXIS_FONT, labelFont: AXIS_FONT, grid: { stroke: "#eee" }, ticks: { stroke: "#ddd" } };
  return {
    width,
    height: HEIGHT,
    scales: {
      x: { time: false },
      y: yScale(logScale),
    },
    series,
    bands,
    legend: { show: false },
    cursor: {
      sync: { key: syncKey, setSeries: false, scales: ["x", null] },
      // Zoom is the page's: a drag asks it to zoom every chart, a double click to show everything.
      drag: { x: true, y: false, setScale: false },
      bind: {
        mousedown: (_u, _t, handler) => (e) => {
          draggedHere = true;
          return handler(e);
        },
        dblclick: () => () => {
          handlers.onZoom(null);
          return null;
        },
      },
      points: {
        // The band's edges get no hover dot: only the group's mean does.
        show: (_u, seriesIdx) => {
          const dot = document.createElement("div");
          dot.className = "u-cursor-pt";
          if (edges.has(seriesIdx)) dot.style.display = "none";
          return dot;
        },
      },
    },
    hooks: {
      setSelect: [
        (u) => {
          const { left, width: selected } = u.select;
          // Synced charts mirror the selection and fire too; only the one dragged in zooms.
          if (draggedHere && selected >= MIN_DRAG_PX) {
            const min = u.posToVal(left, "x");
            const max = u.posToVal(left + selected, "x");
            if (Number.isFinite(min) && Number.isFinite(max)) handlers.onZoom({ min: Math.floor(min), max: Math.ceil(max) });
          }
          draggedHere = false;
          if (selected > 0) u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
        },
      ],
      setCursor: [(u) => handlers.onHover(u)],
    },
    axes: [
      { ...axis, label: "step", labelSize: 18, incrs: STEP_INCREMENTS, values: (_u, splits) => formatTicks(splits) },
      {
        ...axis,
        label: metricKey,
        labelSize: 18,
        size: labelWidth,
        // On a log axis the splits uPlot leaves unlabelled come as null.
        values: (_u: uPlot, splits: (number | null)[]) =>
          logScale ? splits.map((v) => formatLogTick(v ?? null)) : formatTicks(splits as number[]),
      },
    ],
  };
}

export interface CompareChartProps {
  metricKey: string;
  /** uPlot's columns; null until the first answer. */
  data: uPlot.AlignedData | null;
  kind: EntryKind;
  entries: readonly ChartEntry[];
  hidden: ReadonlySet<string>;
  highlight: string | null;
  zoom: StepRange | null;
  logScale: boolean;
  syncKey: string;
  hover: HoverStore;
  onZoom: (range: StepRange | null) => void;
  /** Under the title: runs without the key, the zoom being refined, ... */
  note: ReactNode;
}

/**
 * One metric's chart, every run (or group) on it. Created once per set of lines (runs, grouping,
 * colours) and log axis; data, hiding, highlighting and zoom then go in through setData, setSeries
 * and setScale, so a live batch or a zoom never rebuilds it.
 */
function CompareChartImpl(props: CompareChartProps) {
  const { metricKey, data, kind, entries, hidden, highlight, zoom, logScale, syncKey } = props;
  const containerRef = useRef<HTMLDivElement>(null);
  const plotRef = useRef<uPlot | null>(null);
  const latest = useRef(props);
  latest.current = props;
  const rangesRef = useRef<[number, number][]>([]);
  const signature = `${kind}|${logScale}|${syncKey}|${entries.map((e) => `${e.id}:${e.colour}`).join(",")}`;

  useEffect(() => {
    const container = containerRef.current;
    if (!container) return;
    const { entries: lines, hidden: hiddenNow } = latest.current;
    let over = false;
    const handlers: Handlers = {
      onZoom: (range) => latest.current.onZoom(range),
      onHover: (u) => {
        const store = latest.current.hover;
        const idx = u?.cursor.idx;
        if (!u || !over || idx == null || u.data.length < 2) {
          if (!over) return;
          store.set(null);
          return;
        }
        store.set({
          metricKey,
          step: u.data[0][idx] as number,
          values: hoverValues(u.data, rangesRef.current, idx, u.cursor.idxs ?? [], strideOf(kind)),
        });
      },
    };
    const width = Math.max(240, container.clientWidth);
    const opts = chartOptions(metricKey, width, kind, lines, hiddenNow, logScale, syncKey, handlers);
    const empty: uPlot.AlignedData = [[], ...opts.series.slice(1).map(() => [])];
    const plot = new uPlot(opts, empty, container);
    plotRef.current = plot;
    const enter = () => (over = true);
    const leave = () => {
      over = false;
      latest.current.hover.set(null);
    };
    plot.over?.addEventListener("mouseenter", enter);
    plot.over?.addEventListener("mouseleave", leave);
    const resize = new ResizeObserver(() => {
      const next = Math.max(240, container.clientWidth);
      if (next !== plot.width) plot.setSize({ width: next, height: HEIGHT });
    });
    resize.observe(container);
    return () => {
      // Rebuilt under the pointer (a regrouping, the log axis): no mouseleave will come.
      if (over) latest.current.hover.set(null);
      resize.disconnect();
      plot.over?.removeEventListener("mouseenter", enter);
      plot.over?.removeEventListener("mouseleave", leave);
      plot.destroy();
      plotRef.current = null;
    };
    // `signature` stands for the lines and the axis; everything else is fed below.
  }, [signature, metricKey]);

  // New data: keep the zoom if there is one, else fit it. A chart's first data and a new zoom
  // are drawn at once; live updates go through the draw queue, a few charts a frame.
  const drawnFor = useRef<{ plot: uPlot; zoom: StepRange | null } | null>(null);
  useEffect(() => {
    const plot = plotRef.current;
    if (!plot || !data) return;
    const draw = () => {
      drawnFor.current = { plot, zoom };
      rangesRef.current = definedRanges(data);
      plot.setData(data, zoom === null);
      if (zoom) plot.setScale("x", zoom);
    };
    const drawn = drawnFor.current;
    if (drawn === null || drawn.plot !== plot || drawn.zoom !== zoom) {
      draw();
      return;
    }
    return chartDraws.add(plot, draw);
  }, [data, zoom, signature]);

  useEffect(() => {
    const plot = plotRef.current;
    if (!plot) return;
    const stride = strideOf(kind);
    plot.batch(() => {
      entries.forEach((entry, i) => {
        const show = !hidden.has(entry.id);
        for (let k = 1; k <= stride; k++) {
          const s = i * stride + k;
          if (plot.series[s] && plot.series[s].show !== show) plot.setSeries(s, { show });
        }
      });
    });
  }, [hidden, entries, kind, signature]);

  // Hovering a legend entry dims every other line (and band) and thickens its own.
  useEffect(() => {
    const plot = plotRef.current;
    if (!plot) return;
    const stride = strideOf(kind);
    const base = lineWidth(kind, entries.length);
    entries.forEach((entry, i) => {
      const lit = highlight === null || highlight === entry.id;
      for (let k = 1; k <= stride; k++) {
        const s = plot.series[i * stride + k];
        if (!s) continue;
        s.alpha = lit ? 1 : DIMMED;
        if (k === 1) s.width = highlight === entry.id ? base * 2 : base;
      }
    });
    plot.redraw(false);
  }, [highlight, entries, kind, signature]);

  return (
    <figure className="chart compare-chart" data-testid={`compare-chart-${metricKey}`}>
      <figcaption className="chart-head">
        <span className="chart-key" title={metricKey}>
          {metricKey}
        </span>
        <span className="chart-stats">{props.note}</span>
      </figcaption>
      <div ref={containerRef} className="chart-plot" />
      {data === null ? <p className="muted small compare-chart-loading">Loading…</p> : null}
    </figure>
  );
}

/** Memoised: a live batch for one key re-renders only that key's chart. */
export const CompareChart = memo(CompareChartImpl);
