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
