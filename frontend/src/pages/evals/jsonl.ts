/**
 * Prompts as the API takes them: JSON Lines, `{"prompt": str, "reference"?: str, "tags"?: [str]}`
 * a line. The server names a bad line `jsonl[3]` or `jsonl[3].prompt`, numbered from 1 over the
 * text's lines (blank ones included), and imports nothing then.
 *
 * The server splits lines as Python's str.splitlines() does: at \r and \n, and also at \v, \f,
 * \x1c-\x1e, \x85, U+2028 and U+2029. Line numbers here follow the same rule, and a typed prompt
 * never carries one of those raw (JSON.stringify leaves \x85, U+2028 and U+2029 as they are).
 */

/** Where Python's str.splitlines() splits. */
const LINE_BREAK = /\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]/;

function splitLines(text: string): string[] {
  return text.split(LINE_BREAK);
}

/** A JSON text on one line, as splitlines() sees it: the breaks JSON.stringify keeps, escaped. */
function oneLine(value: unknown): string {
  return JSON.stringify(value).replace(/[\x85\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** A prompt as typed into the form. */
export interface PromptDraft {
  prompt: string;
  reference: string;
  /** Comma-separated, as typed. */
  tags: string;
}

export const EMPTY_PROMPT: PromptDraft = { prompt: "", reference: "", tags: "" };

export function splitTags(tags: string): string[] {
  return tags
    .split(",")
    .map((tag) => tag.trim())
    .filter((tag) => tag !== "");
}

function isBlank(draft: PromptDraft): boolean {
  return draft.prompt.trim() === "" && draft.reference.trim() === "" && splitTags(draft.tags).length === 0;
}

/**
 * The typed prompts as JSONL, and for each line the row it came from: wholly empty rows are left
 * out, so the server's line numbers must be mapped back to rows.
 */
export function draftsToJsonl(drafts: PromptDraft[]): { jsonl: string; rowOfLine: number[] } {
  const lines: string[] = [];
  const rowOfLine: number[] = [];
  drafts.forEach((draft, row) => {
    if (isBlank(draft)) return;
    const tags = splitTags(draft.tags);
    lines.push(
      oneLine({
        prompt: draft.prompt,
        ...(draft.reference.trim() ? { reference: draft.reference } : {}),
        ...(tags.length > 0 ? { tags } : {}),
      }),
    );
    rowOfLine.push(row);
  });
  return { jsonl: lines.join("\n"), rowOfLine };
}

/** One bad line as the server named it: the field ("" for the line itself) → messages. */
export type LineErrors = Map<number, Map<string, string[]>>;

const LINE_PATH = /^jsonl\[(\d+)\](?:\.(.+))?$/;

/** `{"jsonl[3].prompt": [...], "jsonl[5]": [...]}` → {3: {prompt: [...]}, 5: {"": [...]}}. */
export function lineErrors(fields: Record<string, string[]>): LineErrors {
  const byLine: LineErrors = new Map();
  for (const [path, messages] of Object.entries(fields)) {
    const match = LINE_PATH.exec(path);
    if (!match) continue;
    const line = Number(match[1]);
    const field = match[2] ?? "";
    const entry = byLine.get(line) ?? new Map<string, string[]>();
    entry.set(field, messages);
    byLine.set(line, entry);
  }
  return new Map([...byLine.entries()].sort(([a], [b]) => a - b));
}

export function isLinePath(path: string): boolean {
  return LINE_PATH.test(path);
}

/** The text of line `number` (from 1), shortened for showing beside its error. */
export function lineText(text: string, number: number, max = 160): string {
  const line = splitLines(text)[number - 1] ?? "";
  return line.length > max ? `${line.slice(0, max)}…` : line;
}

/** Prompts in a JSONL text: its non-blank lines (what the server would try to import). */
export function countLines(text: string): number {
  return splitLines(text).filter((line) => line.trim() !== "").length;
}
