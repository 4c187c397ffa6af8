import { addDays, barHeights } from "./format";

/**
 * Counts as bars, oldest first: a row's sparkline (small, no labels) or a page's figure. Each
 * bar's title names its bucket (`start` plus `step` days per bar) and its count.
 */
export function CountBars({
  counts,
  start,
  step,
  width,
  height,
  unit,
  testId,
}: {
  counts: readonly number[];
  start: string;
  /** Days per bar: 1 for days, 7 for weeks. */
  step: number;
  width: number;
  height: number;
  /** What a bar counts ("failures", "fixed"), for its title. */
  unit: string;
  testId?: string;
}) {
  const heights = barHeights(counts, height - 1);
  const slot = counts.length > 0 ? width / counts.length : width;
  const bar = Math.max(1, slot - (slot > 4 ? 1 : 0));
  return (
    <svg className="count-bars" width={width} height={height} role="img" data-testid={testId} aria-label={`${unit} over time`}>
      <line x1={0} x2={width} y1={height - 0.5} y2={height - 0.5} className="baseline" />
      {heights.map((h, i) => (
        <rect key={i} x={i * slot} y={height - 1 - h} width={bar} height={h} data-count={counts[i]}>
          <title>{`${addDays(start, i * step)}: ${counts[i]} ${unit}`}</title>
        </rect>
      ))}
    </svg>
  );
}
