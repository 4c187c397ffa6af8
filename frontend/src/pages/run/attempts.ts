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
