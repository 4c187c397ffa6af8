/** Helpers of the run page's attempts table and waiting banner. Pure, so tests need no DOM. */

/**
 * A commit hash shortened as git does (12 characters), keeping a suffix such as "-dirty";
 * anything else (a tag) as given. The full version goes in the cell's title.
 */
export function shortCode(code: string | null | undefined): string {
  if (!code) return "–";
  const hash = /^([0-9a-f]{12})[0-9a-f]+(.*)$/i.exec(code);
  return hash ? `${hash[1]}${hash[2]}` : code;
}

const WAITING_PREFIX = "waiting for cluster resources:";

/** "waiting for cluster resources: 2 tasks need …" → a title and the rest of the note. */
export function waitingParts(note: string): { title: string; detail: string } {
  if (note.toLowerCase().startsWith(WAITING_PREFIX)) {
    return { title: "Waiting for cluster resources", detail: note.slice(WAITING_PREFIX.length).trim() };
  }
  return { title: note.charAt(0).toUpperCase() + note.slice(1), detail: "" };
}

/** An attempt's sandbox record (`Attempt.sandbox`, the sandboxes' describe()) as the attempts table shows it. */
export interface SandboxRecord {
  tier: string;
  /** Weaker than bubblewrap, or no isolation could run. */
  fallback: boolean;
  /** Why it fell back and what is not enforced, for the cell's title. */
  detail: string;
}

/** null for an attempt whose run runs no code (an empty record) or a record of another shape. */
export function sandboxRecord(sandbox: unknown): SandboxRecord | null {
  if (sandbox === null || typeof sandbox !== "object" || Array.isArray(sandbox)) return null;
  const { tier, reason_for_fallback: reason, unavailable, not_enforced: missing } = sandbox as Record<string, unknown>;
  if (typeof tier !== "string" || !tier) return null;
  const why = [reason, unavailable].filter((v): v is string => typeof v === "string" && v !== "");
  const notEnforced = Array.isArray(missing) ? missing.filter((v): v is string => typeof v === "string") : [];
  const detail = [...why, ...(notEnforced.length ? [`not enforced: ${notEnforced.join(", ")}`] : [])].join("; ");
  return { tier: typeof unavailable === "string" && unavailable ? "none" : tier, fallback: tier !== "bubblewrap" || why.length > 0, detail };
}
