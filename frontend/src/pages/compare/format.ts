import { formatMetricValue } from "../../api/nonfinite";

/**
 * A label of a log axis: decades far from 1 as "1e-5" (uPlot's own labels round them to "0",
 * formatMetricValue writes "1.000e-5"); anything else as formatMetricValue does.
 */
export function formatLogTick(value: number | null): string {
  if (value === null) return "";
  const exponent = Math.round(Math.log10(Math.abs(value)));
  const decade = value > 0 && Math.abs(value / 10 ** exponent - 1) < 1e-9;
  if (decade && (exponent < -3 || exponent > 5)) return `1e${exponent}`;
  return formatMetricValue(value);
}
