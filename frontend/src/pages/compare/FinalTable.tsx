import { memo, useState } from "react";

import { formatMetricValue } from "../../api/nonfinite";
import { difference, formatSigned, sortRows, type FinalCell, type FinalRow, type RowSort } from "./finals";

function valueText(cell: FinalCell | undefined, isGroup: boolean, runCount: number): string {
  if (!cell || cell.value === null) return "–";
  const value = formatMetricValue(cell.value);
  if (!isGroup) return value;
  const spread = cell.sd === null ? "" : ` ± ${formatMetricValue(cell.sd)}`;
  return `${value}${spread}${cell.n < runCount ? ` (${cell.n} of ${runCount})` : ""}`;
}

function differenceText(value: number | null | undefined, base: number | null | undefined): string {
  const diff = difference(value, base);
  if (!diff) return "";
  const percent = diff.percent === null ? "" : ` (${formatSigned(diff.percent, (v) => v.toFixed(1))} %)`;
  return `${formatSigned(diff.absolute, formatMetricValue)}${percent}`;
}

/**
 * Final values per run (or group) and key, each against a baseline row chosen here: absolute
 * and relative difference. Sorted by clicking a column's header (again to reverse).
 */
export const FinalTable = memo(function FinalTable({
  rows,
  keys,
  grouped,
}: {
  rows: readonly FinalRow[];
  keys: readonly string[];
  grouped: boolean;
}) {
  const [baselineId, setBaselineId] = useState<string | null>(null);
  const [sort, setSort] = useState<RowSort | null>(null);
  if (rows.length === 0 || keys.length === 0) return null;
  const baseline = rows.find((row) => row.id === baselineId) ?? rows[0];
  const sorted = sort ? sortRows(rows, sort) : rows;
  const sortBy = (column: string | null) =>
    setSort((old) =>
      old && old.column === column ? { column, descending: !old.descending } : { column, descending: column !== null },
    );
  const ariaSort = (column: string | null) =>
    sort?.column === column ? (sort.descending ? "descending" : "ascending") : undefined;
  const arrow = (column: string | null) => (sort?.column === column ? (sort.descending ? " ▼" : " ▲") : "");

  return (
    <section className="panel compare-below" data-testid="final-table">
      <div className="section-head">
        <h2>Final values</h2>
        <label className="small">
          difference against{" "}
          <select
            value={baseline?.id ?? ""}
            onChange={(e) => setBaselineId(e.target.value)}
            data-testid="final-baseline"
          >
            {rows.map((row) => (
              <option key={row.id} value={row.id}>
                {row.label}
              </option>
            ))}
          </select>
        </label>
      </div>
      <p className="muted small">
        {grouped
          ? "Each group's mean ± standard deviation of its runs' last values (NaN and ±Inf left out)."
          : "Each run's last value."}{" "}
        Below each value: its difference from the baseline row, and in percent of the baseline.
      </p>
      <div className="table-scroll">
        <table className="table compare-finals">
          <thead>
            <tr>
              <th aria-sort={ariaSort(null)}>
                <button type="button" className="sort-button" onClick={() => sortBy(null)}>
                  {grouped ? "group" : "run"}
                  {arrow(null)}
                </button>
              </th>
              {keys.map((key) => (
                <th key={key} className="num" aria-sort={ariaSort(key)}>
                  <button type="button" className="sort-button" onClick={() => sortBy(key)} title={`Sort by ${key}`}>
                    {key}
                    {arrow(key)}
                  </button>
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {sorted.map((row) => {
              const isBaseline = row.id === baseline?.id;
              return (
                <tr key={row.id} className={isBaseline ? "baseline" : undefined} data-testid={`final-row-${row.id}`}>
                  <td title={row.label}>
                    {row.label}
                    {row.isGroup ? <span className="muted"> ({row.runCount} runs)</span> : null}
                    {isBaseline ? <span className="tag baseline-tag">baseline</span> : null}
                  </td>
                  {keys.map((key) => {
                    const cell = row.cells[key];
                    return (
                      <td key={key} className="num">
                        <div>{valueText(cell, row.isGroup, row.runCount)}</div>
                        {isBaseline ? null : (
                          <div className="muted small" data-testid="final-diff">
                            {differenceText(cell?.value, baseline?.cells[key]?.value)}
                          </div>
                        )}
                      </td>
                    );
                  })}
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </section>
  );
});
