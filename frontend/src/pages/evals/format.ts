import type { EvalProgress, RankingRow, WireFloat } from "../../api/types";

function rounded(value: WireFloat | null): string {
  if (value === null) return "–";
  if (typeof value === "string") return value;
  return String(Math.round(value));
}

/** "1012 [987, 1040]": the score and its bootstrap 95 % interval. */
export function formatScore(row: Pick<RankingRow, "score" | "ci_low" | "ci_high">): string {
  if (row.score === null) return "–";
  const interval = row.ci_low === null || row.ci_high === null ? "" : ` [${rounded(row.ci_low)}, ${rounded(row.ci_high)}]`;
  return `${rounded(row.score)}${interval}`;
}

/** "120 / 300 responses (40 %)" while generating; votes and coverage after. */
export function generationProgress(progress: EvalProgress): string {
  const share = progress.expected > 0 ? Math.floor((100 * progress.generations) / progress.expected) : 0;
  return `${progress.generations} / ${progress.expected} responses (${share} %)`;
}

export function voteProgress(progress: EvalProgress): string {
  return `${progress.votes} votes on ${progress.battles} battles · ${progress.prompts_covered} / ${progress.prompts} prompts covered`;
}

/**
 * Krippendorff's α with its reading, on the thresholds Krippendorff gives (and Argilla shows):
 * ≥ 0.8 reliable, ≥ 0.667 tentative, below that the voters disagree too often.
 */
export function alphaReading(alpha: WireFloat | null): string {
  if (alpha === null || typeof alpha === "string") {
    return "not measured yet: it needs battles that two or more people voted on";
  }
  const value = `α = ${alpha.toFixed(2)}`;
  if (alpha >= 0.8) return `${value}: reliable (≥ 0.8)`;
  if (alpha >= 0.667) return `${value}: tentative (≥ 0.667); enough for tentative conclusions only`;
  return `${value}: unreliable (< 0.667); the voters disagree too often to draw conclusions`;
}

/** "60 %" of a win rate; "–" where the two never met. */
export function formatWinRate(rate: WireFloat | null): string {
  if (rate === null || typeof rate === "string") return "–";
  return `${Math.round(rate * 100)} %`;
}

/** A heat colour for a win rate: red at 0, neutral at 0.5, green at 1; none where they never met. */
export function winRateColor(rate: WireFloat | null): string | undefined {
  if (rate === null || typeof rate === "string") return undefined;
  const clamped = Math.min(1, Math.max(0, rate));
  const hue = clamped >= 0.5 ? 130 : 0;
  const strength = Math.round(Math.abs(clamped - 0.5) * 2 * 55);
  return `hsl(${hue} 60% ${97 - strength}%)`;
}

/** The length preference β (log10 odds per standard deviation of the relative length
 * difference, as Arena's style control) as a sentence. */
export function lengthPreference(beta: WireFloat | null): string {
  if (beta === null || typeof beta === "string") return "no votes yet";
  const points = Math.round(400 * beta);
  if (Math.abs(points) < 1) return "none measurable";
  const side = points > 0 ? "longer" : "shorter";
  return `voters favour ${side} responses (β = ${beta.toFixed(3)}: a typical length difference is worth ${Math.abs(points)} Arena points)`;
}
