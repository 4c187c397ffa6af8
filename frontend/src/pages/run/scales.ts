import uPlot from "uplot";

import { flatRange } from "./charts";

// Apart from charts.ts, which node tests import without uPlot (it needs a DOM), and from the
// chart components, so that both pages' component tests can stand a fake uPlot in for it.

/**
 * A chart's y scale: uPlot's default ranging (10% padding, soft zero) unless the data is flat;
 * on a log axis, whole decades.
 */
export function yScale(logScale: boolean): uPlot.Scale {
  if (logScale) return { distr: 3, log: 10 };
  return {
    range: (_u, min, max) =>
      min == null || max == null ? [null, null] : (flatRange(min, max) ?? uPlot.rangeNum(min, max, 0.1, true)),
  };
}

