import { useMemo, useState, useSyncExternalStore } from "react";

import { formatMetricValue } from "../../api/nonfinite";
import type { ChartEntry } from "./CompareChart";
import type { HoverStore } from "./hover";

/** Rows per legend page: enough to scan, few enough to re-render on every mouse move. */
export const LEGEND_PAGE = 40;

export interface LegendEntry extends ChartEntry {
  /** Shown after the label: "(5 runs)" for a group, "#12" for a run. */
  detail: string;
  /** Full text on hover (a run's id and status, a group's config path). */
  title: string;
}

interface LegendProps {
  heading: string;
  entries: readonly LegendEntry[];
  hidden: ReadonlySet<string>;
  onToggle: (id: string) => void;
  onOnly: (id: string) => void;
  onShowAll: () => void;
  onHighlight: (id: string | null) => void;
  hover: HoverStore;
}

/**
 * One legend for every chart: colour, name and the value under the cursor, a filter, click to
 * hide or show, "only" to isolate one, hover (or focus) to light one up on every chart. Paged, so
 * that a hundred runs stay usable and cheap to redraw as the cursor moves.
 */
export function Legend({ heading, entries, hidden, onToggle, onOnly, onShowAll, onHighlight, hover }: LegendProps) {
  const [filter, setFilter] = useState("");
  const [page, setPage] = useState(0);
  const hovered = useSyncExternalStore(hover.subscribe, hover.get);
  const position = useMemo(() => new Map(entries.map((entry, i) => [entry.id, i])), [entries]);
  const needle = filter.trim().toLowerCase();
  const shown = needle
    ? entries.filter((e) => e.label.toLowerCase().includes(needle) || e.detail.toLowerCase().includes(needle))
    : entries;
  const pages = Math.max(1, Math.ceil(shown.length / LEGEND_PAGE));
  const current = Math.min(page, pages - 1);
  const rows = shown.slice(current * LEGEND_PAGE, (current + 1) * LEGEND_PAGE);
  const hiddenCount = entries.filter((e) => hidden.has(e.id)).length;

  return (
    <aside className="compare-legend panel" data-testid="legend" aria-label="Legend">
      <div className="legend-head">
        <h2>{heading}</h2>
        {hiddenCount > 0 ? (
          <button type="button" className="link-button small" onClick={onShowAll}>
            show all ({hiddenCount} hidden)
          </button>
        ) : null}
      </div>
      {entries.length > 8 ? (
        <input
          type="search"
          className="legend-filter"
          placeholder="filter…"
          aria-label="Filter the legend"
          value={filter}
          onChange={(e) => {
            setFilter(e.target.value);
            setPage(0);
          }}
          data-testid="legend-filter"
        />
      ) : null}
      <p className="muted small legend-cursor" data-testid="legend-cursor">
        {hovered ? (
          <>
            <code>{hovered.metricKey}</code> at step <span className="num">{hovered.step}</span>
          </>
        ) : (
          "Hover a chart for values; drag to zoom, double-click to reset."
        )}
      </p>
      <ul className="legend-list">
        {rows.map((entry) => {
          const off = hidden.has(entry.id);
          const at = position.get(entry.id);
          const value = hovered && at !== undefined ? hovered.values[at] : undefined;
          return (
            <li
              key={entry.id}
              className={off ? "legend-row off" : "legend-row"}
              data-testid="legend-entry"
              onMouseEnter={() => onHighlight(off ? null : entry.id)}
              onMouseLeave={() => onHighlight(null)}
              onFocus={() => onHighlight(off ? null : entry.id)}
              onBlur={() => onHighlight(null)}
            >
              <button
                type="button"
                className="legend-toggle"
                aria-pressed={!off}
                title={`${entry.title} — click to ${off ? "show" : "hide"}`}
                onClick={() => onToggle(entry.id)}
              >
                <span className="legend-swatch" style={{ background: entry.colour }} aria-hidden="true" />
                <span className="legend-label" data-testid="legend-label">
                  {entry.label}
                  {entry.detail ? <span className="muted"> {entry.detail}</span> : null}
                </span>
              </button>
              <span className="num legend-value">{value === undefined ? "" : formatMetricValue(value)}</span>
              <button
                type="button"
                className="link-button small legend-only"
                aria-label={`Show only ${entry.label}`}
                onClick={() => onOnly(entry.id)}
              >
                only
              </button>
            </li>
          );
        })}
        {rows.length === 0 ? <li className="muted small">Nothing matches “{filter}”.</li> : null}
      </ul>
      {pages > 1 ? (
        <div className="legend-pager small">
          <button type="button" disabled={current === 0} onClick={() => setPage(current - 1)} aria-label="Previous legend page">
            ‹
          </button>
          <span className="muted">
            {current * LEGEND_PAGE + 1}–{Math.min(shown.length, (current + 1) * LEGEND_PAGE)} of {shown.length}
          </span>
          <button
            type="button"
            disabled={current >= pages - 1}
            onClick={() => setPage(current + 1)}
            aria-label="Next legend page"
          >
            ›
          </button>
        </div>
      ) : null}
    </aside>
  );
}
