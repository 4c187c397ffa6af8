/**
 * The table of final metrics: each run's last value per key (a group's mean ± sd across its
 * runs), the difference against a baseline row, and sorting.
 */
import type { Series } from "../../api/metrics";
import type { SeriesTable } from "./align";

/** A row: one run, or a group of runs. */
export interface FinalEntry {
  id: string;
  label: string;
  runIds: readonly number[];
  isGroup: boolean;
}

export interface FinalCell {
  /** A run's last value (NaN and ±Infinity kept); a group's mean of its runs' finite ones. */
  value: number | null;
  /** A group's sample standard deviation (null under two runs); null for a run. */
  sd: number | null;
  /** Runs whose final value is counted. */
  n: number;
  /** Runs without the key, or (in a group) with a non-finite final value. */
  missing: number;
}

export interface FinalRow {
  id: string;
  label: string;
  isGroup: boolean;
  runCount: number;
  cells: Record<string, FinalCell>;
}

/** The value at the series' last step (its last bucket's last point). */
export function finalValue(series: Series | undefined): number | undefined {
  if (!series || series.last.length === 0) return undefined;
  return series.last[series.last.length - 1];
}

function cellFor(entry: FinalEntry, byRun: Map<number, Series> | undefined): FinalCell {
  const finals = entry.runIds.map((id) => finalValue(byRun?.get(id)));
  if (!entry.isGroup) {
    const value = finals[0];
    return { value: value ?? null, sd: null, n: value === undefined ? 0 : 1, missing: value === undefined ? 1 : 0 };
  }
  const finite = finals.filter((v): v is number => v !== undefined && Number.isFinite(v));
  const n = finite.length;
  if (n === 0) return { value: null, sd: null, n: 0, missing: finals.length };
  const mean = finite.reduce((a, b) => a + b, 0) / n;
  const sd = n >= 2 ? Math.sqrt(finite.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1)) : null;
  return { value: mean, sd, n, missing: finals.length - n };
}

export function finalRows(entries: readonly FinalEntry[], table: SeriesTable, keys: readonly string[]): FinalRow[] {
  return entries.map((entry) => {
    const cells: Record<string, FinalCell> = {};
    for (const key of keys) cells[key] = cellFor(entry, table.get(key));
    return { id: entry.id, label: entry.label, isGroup: entry.isGroup, runCount: entry.runIds.length, cells };
  });
}

export interface Difference {
  absolute: number;
  /** Relative to the baseline's magnitude, in percent; null when the baseline is 0. */
  percent: number | null;
}

/** `value − baseline`, or null when either is missing or not finite. */
export function difference(value: number | null | undefined, baseline: number | null | undefined): Difference | null {
  if (value == null || baseline == null || !Number.isFinite(value) || !Number.isFinite(baseline)) return null;
  const absolute = value - baseline;
  return { absolute, percent: baseline === 0 ? null : (absolute / Math.abs(baseline)) * 100 };
}

/** Sort by the name column, or by a key's value. */
export interface RowSort {
  column: string | null;
  descending: boolean;
}

/**
 * Rows sorted by a key's value (rows without a finite one last, in either direction) or by
 * name; ties keep their order. Sorting by value sorts by the difference too: one baseline.
 */
export function sortRows(rows: readonly FinalRow[], sort: RowSort): FinalRow[] {
  const sign = sort.descending ? -1 : 1;
  const indexed = rows.map((row, index) => ({ row, index }));
  indexed.sort((a, b) => {
    if (sort.column === null) {
      return sign * a.row.label.localeCompare(b.row.label, undefined, { numeric: true }) || a.index - b.index;
    }
    const va = a.row.cells[sort.column]?.value;
    const vb = b.row.cells[sort.column]?.value;
    const fa = va != null && Number.isFinite(va);
    const fb = vb != null && Number.isFinite(vb);
    if (fa !== fb) return fa ? -1 : 1;
    if (!fa || !fb) return a.index - b.index;
    return sign * ((va as number) - (vb as number)) || a.index - b.index;
  });
  return indexed.map(({ row }) => row);
}

/** "+0.012", "−0.5"; a signed figure in the style of formatMetricValue. */
export function formatSigned(value: number, format: (v: number) => string): string {
  if (value === 0) return "±0";
  return value > 0 ? `+${format(value)}` : `−${format(-value)}`;
}
