import type { WireFloat } from "./types";

/**
 * Turn a wire float into a JS number: "NaN", "Infinity" and "-Infinity"
 * become the matching non-finite numbers; null and anything unparseable
 * become NaN (a gap), so one bad value never breaks a whole series.
 */
export function parseWireFloat(value: WireFloat | string | null | undefined): number {
  if (typeof value === "number") return value;
  switch (value) {
    case "NaN":
      return Number.NaN;
    case "Infinity":
      return Number.POSITIVE_INFINITY;
    case "-Infinity":
      return Number.NEGATIVE_INFINITY;
    default: {
      if (typeof value !== "string") return Number.NaN;
      // Be lenient with other spellings a server might send ("inf", "1e3").
      const lowered = value.trim().toLowerCase();
      if (lowered === "inf" || lowered === "+inf" || lowered === "+infinity") {
        return Number.POSITIVE_INFINITY;
      }
      if (lowered === "-inf") return Number.NEGATIVE_INFINITY;
      return lowered === "" ? Number.NaN : Number(value);
    }
  }
}

export function parseWireFloats(values: readonly (WireFloat | string | null)[]): number[] {
  return values.map(parseWireFloat);
}

/** uPlot draws a gap at null and cannot place ±Infinity, so both become null. */
export function toPlottable(value: number): number | null {
  return Number.isFinite(value) ? value : null;
}

/** Short human text for a metric value, non-finite values included. */
export function formatMetricValue(value: number | null | undefined): string {
  if (value === null || value === undefined) return "–";
  if (Number.isNaN(value)) return "NaN";
  if (value === Number.POSITIVE_INFINITY) return "+Inf";
  if (value === Number.NEGATIVE_INFINITY) return "−Inf";
  if (value === 0) return "0";
  const abs = Math.abs(value);
  if (abs >= 1e6 || abs < 1e-3) return value.toExponential(3);
  return Number(value.toPrecision(5)).toString();
}
