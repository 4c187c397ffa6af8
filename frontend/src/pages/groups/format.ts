import { formatMetricValue, parseWireFloat } from "../../api/nonfinite";
import type { RunGroup, WireFloat } from "../../api/types";

/** A figure of the statistics, as a person reads it. */
export function formatFigure(value: WireFloat | null | undefined): string {
  return value === null || value === undefined ? "–" : formatMetricValue(parseWireFloat(value));
}

/** "[0.47, 0.51]", or "–" without an interval. */
export function formatInterval(interval: readonly WireFloat[] | null | undefined): string {
  if (!interval || interval.length !== 2) return "–";
  return `[${formatFigure(interval[0])}, ${formatFigure(interval[1])}]`;
}

/** What a sweep varied: "interval_s: 0.1, 0.2 × tasks_per_step: 1, 2 × 3 seeds". */
export function describeSweep(group: Pick<RunGroup, "grid" | "seeds" | "kind">): string {
  if (group.kind !== "sweep") return "runs grouped by hand";
  const grid = group.grid as Record<string, unknown[]>;
  const fields = Object.entries(grid).map(([path, values]) => `${path}: ${values.map(String).join(", ")}`);
  const seeds = `${group.seeds.length} seed${group.seeds.length === 1 ? "" : "s"}`;
  return [...fields, seeds].join(" × ");
}
