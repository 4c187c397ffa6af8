/** Formatting shared by the pages. Pure, so the tests need no DOM. */

/** "1 chart", "3 charts", "0 charts": the count and its noun, plural unless the count is 1. */
export function plural(count: number, noun: string, nouns = `${noun}s`): string {
  return `${count} ${count === 1 ? noun : nouns}`;
}

/** "2h 03m", "4m 05s", "12s"; negative or NaN → "–". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "–";
  const total = Math.floor(ms / 1000);
  const days = Math.floor(total / 86_400);
  const hours = Math.floor((total % 86_400) / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = total % 60;
  const pad = (n: number) => String(n).padStart(2, "0");
  if (days > 0) return `${days}d ${pad(hours)}h`;
  if (hours > 0) return `${hours}h ${pad(minutes)}m`;
  if (minutes > 0) return `${minutes}m ${pad(seconds)}s`;
  return `${seconds}s`;
}

interface Timed {
  started_at: string | null;
  finished_at: string | null;
  /** A resumed run's earlier attempts; absent means none. */
  earlier_attempts_s?: number;
}

/**
 * Wall time a run has run: its earlier attempts' (a resumed run), plus the current attempt's
 * from its start to its finish, or to now while it runs; null before it ever started.
 */
export function runDurationMs(run: Timed, now: number): number | null {
  const earlier = Math.max(0, (run.earlier_attempts_s ?? 0) * 1000);
  if (!run.started_at) return earlier > 0 ? earlier : null;
  const start = Date.parse(run.started_at);
  const end = run.finished_at ? Date.parse(run.finished_at) : now;
  if (Number.isNaN(start) || Number.isNaN(end)) return null;
  return earlier + Math.max(0, end - start);
}

/** "2025-11-30 09:14" in local time; the full ISO string goes in a title attribute. */
export function formatDateTime(iso: string | null | undefined): string {
  if (!iso) return "–";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const pad = (n: number) => String(n).padStart(2, "0");
  return (
    `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ` +
    `${pad(date.getHours())}:${pad(date.getMinutes())}`
  );
}

/** "just now", "5 min ago", "3 h ago", "2 d ago". */
export function formatAgo(iso: string | null | undefined, now: number): string {
  if (!iso) return "–";
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return iso;
  const seconds = Math.round((now - then) / 1000);
  if (seconds < 45) return "just now";
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 48) return `${hours} h ago`;
  return `${Math.round(hours / 24)} d ago`;
}
