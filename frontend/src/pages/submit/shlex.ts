/**
 * A command line split into words and joined back, as Python's `shlex.split` and `shlex.join`
 * do (POSIX rules, no comments). The server's split is the truth: the form sends the line as
 * typed and only uses this to show the words it expects and to tell whether a clone's command
 * changed.
 */

export type SplitResult = { ok: true; words: string[] } | { ok: false; error: string };

const SPACE = /[ \t\r\n]/; // shlex.whitespace

export function shellSplit(line: string): SplitResult {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let quote: "'" | '"' | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line.charAt(i);
    if (quote === "'") {
      if (c === "'") quote = null;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === "\\" && i + 1 < line.length && (line[i + 1] === '"' || line[i + 1] === "\\")) {
        word += line.charAt(++i);
      } else if (c === "\\" && i + 1 >= line.length) return { ok: false, error: "no escaped character" };
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === "\\") {
      if (i + 1 >= line.length) return { ok: false, error: "no escaped character" };
      word += line.charAt(++i);
      inWord = true;
    } else if (SPACE.test(c)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote !== null) return { ok: false, error: "no closing quotation" };
  if (inWord) words.push(word);
  return { ok: true, words };
}

const SAFE = /^[\w@%+=:,./-]+$/;

/** One word as `shlex.quote` writes it. */
export function shellQuote(word: string): string {
  if (word === "") return "''";
  if (SAFE.test(word)) return word;
  return `'${word.replace(/'/g, `'"'"'`)}'`;
}

/** Words as one line that splits back into them. */
export function shellJoin(words: readonly string[]): string {
  return words.map(shellQuote).join(" ");
}
