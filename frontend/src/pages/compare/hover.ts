/**
 * The value under the cursor, for the shared legend: which chart, which step, and each legend
 * entry's value there. A tiny store outside React: the chart writes it on every mouse move, and
 * only the legend (subscribed with useSyncExternalStore) re-renders.
 */
import type uPlot from "uplot";

import type { Cell } from "./align";

export interface HoverState {
  metricKey: string;
  step: number;
  /** One per legend entry, in the chart's entry order; undefined where it has no value there. */
  values: Cell[];
}

export class HoverStore {
  private state: HoverState | null = null;
  private readonly listeners = new Set<() => void>();

  readonly subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  readonly get = (): HoverState | null => this.state;

  set(state: HoverState | null): void {
    if (state === null && this.state === null) return;
    this.state = state;
    for (const listener of this.listeners) listener();
  }
}

/** First and last index of each column holding a value (null included); -1 when none. */
export function definedRanges(data: uPlot.AlignedData): [number, number][] {
  return data.slice(1).map((column) => {
    let first = -1;
    let last = -1;
    for (let i = 0; i < column.length; i++) {
      if (column[i] !== undefined) {
        if (first < 0) first = i;
        last = i;
      }
    }
    return [first, last];
  });
}

/**
 * Each entry's value at cursor index `idx`: its own nearest point (uPlot's per-series `idxs`, which
 * skip the steps it does not report), but only inside the steps it spans: a run that stopped at
 * step 100 has no value at step 900. `stride`: series per entry (1 for runs; 3 for groups, the
 * first being the mean).
 */
export function hoverValues(
  data: uPlot.AlignedData,
  ranges: readonly [number, number][],
  idx: number,
  idxs: readonly (number | null | undefined)[],
  stride: number,
): Cell[] {
  const values: Cell[] = [];
  for (let s = 1; s < data.length; s += stride) {
    const range = ranges[s - 1];
    const at = idxs[s];
    if (!range || range[0] < 0 || idx < range[0] || idx > range[1] || at == null) values.push(undefined);
    else values.push((data[s] as ArrayLike<Cell>)[at]);
  }
  return values;
}
