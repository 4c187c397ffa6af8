/** How the Artifacts panel shows a file, decided by its name and size. */

export type ArtifactView = "json" | "text" | "image" | "download";

/** Larger text is not fetched into the page: it is offered as a download. */
export const MAX_INLINE_TEXT_BYTES = 512 * 1024;
/** Larger images are linked, not loaded. */
export const MAX_INLINE_IMAGE_BYTES = 20 * 1024 * 1024;

const TEXT = new Set([
  "txt", "log", "md", "yaml", "yml", "toml", "ini", "cfg", "conf", "csv", "tsv", "jsonl", "ndjson",
  "py", "sh", "html", "xml", "diff", "patch", "out", "err",
]);
const IMAGE = new Set(["png", "jpg", "jpeg", "gif", "webp", "svg", "bmp", "avif"]);

function extension(name: string): string {
  const dot = name.lastIndexOf(".");
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : "";
}

export function artifactView(name: string, size: number | null): ArtifactView {
  const ext = extension(name);
  const bytes = size ?? 0;
  if (IMAGE.has(ext)) return bytes <= MAX_INLINE_IMAGE_BYTES ? "image" : "download";
  if (ext === "json" || TEXT.has(ext)) {
    if (bytes > MAX_INLINE_TEXT_BYTES) return "download";
    return ext === "json" ? "json" : "text";
  }
  return "download";
}

/** JSON indented for reading; text that does not parse is shown as it came. */
export function prettyJson(text: string): { text: string; valid: boolean } {
  try {
    return { text: JSON.stringify(JSON.parse(text), null, 2), valid: true };
  } catch {
    return { text, valid: false };
  }
}

/** "a/b/c" → [{name: "a", path: "a"}, {name: "b", path: "a/b"}, {name: "c", path: "a/b/c"}]. */
export function breadcrumbs(path: string): { name: string; path: string }[] {
  const parts = path.split("/").filter(Boolean);
  return parts.map((name, i) => ({ name, path: parts.slice(0, i + 1).join("/") }));
}

/** 1536 → "1.5 KB". */
export function formatBytes(bytes: number | null): string {
  if (bytes === null) return "–";
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}
