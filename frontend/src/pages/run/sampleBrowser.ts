/**
 * The run page's sample browser, as pure functions: its view in the URL, what it asks the API
 * for, search highlighting, collapsing long texts, and one prompt's samples across versions.
 */
import type { Sample } from "../../api/types";

/** The browser's URL parameters all start with this, beside the run page's own. */
export const PREFIX = "samples.";
/** The API refuses longer searches. */
export const MAX_SEARCH = 200;

export const ORDERS = ["-step", "step", "-reward", "reward", "-tokens", "tokens"] as const;
export type SampleOrder = (typeof ORDERS)[number];
export const DEFAULT_ORDER: SampleOrder = "-step";
export const ORDER_LABELS: Record<SampleOrder, string> = {
  "-step": "newest step first",
  step: "oldest step first",
  "-reward": "highest reward first",
  reward: "lowest reward first",
  "-tokens": "longest response first",
  tokens: "shortest response first",
};

/** The range bounds, as typed (kept as text: "0.5" and "" survive a round trip through the URL). */
export const BOUNDS = ["min_step", "max_step", "min_reward", "max_reward", "min_tokens", "max_tokens"] as const;
export type Bound = (typeof BOUNDS)[number];

export interface SampleFilters extends Record<Bound, string> {
  q: string;
  order: SampleOrder;
  /** Zero-based page. */
  page: number;
  /** The sample whose prompt is shown across steps and weight versions; null: the list. */
  prompt: number | null;
}

export const NO_FILTERS: SampleFilters = {
  min_step: "",
  max_step: "",
  min_reward: "",
  max_reward: "",
  min_tokens: "",
  max_tokens: "",
  q: "",
  order: DEFAULT_ORDER,
  page: 0,
  prompt: null,
};

function isOrder(value: string | null): value is SampleOrder {
  return value !== null && (ORDERS as readonly string[]).includes(value);
}

function positiveInt(text: string | null): number | null {
  if (text === null || !/^\d+$/.test(text)) return null;
  const n = Number(text);
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

/** The browser's view in the run page's URL (`samples.min_step=100&samples.q=boxed`...). */
export function filtersFromSearch(search: URLSearchParams): SampleFilters {
  const filters: SampleFilters = { ...NO_FILTERS };
  for (const bound of BOUNDS) filters[bound] = (search.get(PREFIX + bound) ?? "").trim();
  filters.q = (search.get(`${PREFIX}q`) ?? "").slice(0, MAX_SEARCH);
  const order = search.get(`${PREFIX}order`);
  if (isOrder(order)) filters.order = order;
  // One-based in the URL, as people count pages.
  const page = positiveInt(search.get(`${PREFIX}page`));
  if (page !== null) filters.page = page - 1;
  filters.prompt = positiveInt(search.get(`${PREFIX}prompt`));
  return filters;
}

/**
 * `search` with the browser's view replaced by `filters`: the run page's other parameters are
 * kept as they are, and defaults are left out so that an untouched page has a clean URL.
 */
export function searchWithFilters(search: URLSearchParams, filters: SampleFilters): URLSearchParams {
  const next = new URLSearchParams();
  for (const [name, value] of search) if (!name.startsWith(PREFIX)) next.append(name, value);
  for (const bound of BOUNDS) if (filters[bound].trim()) next.set(PREFIX + bound, filters[bound].trim());
  if (filters.q) next.set(`${PREFIX}q`, filters.q);
  if (filters.order !== DEFAULT_ORDER) next.set(`${PREFIX}order`, filters.order);
  if (filters.page > 0) next.set(`${PREFIX}page`, String(filters.page + 1));
  if (filters.prompt !== null) next.set(`${PREFIX}prompt`, String(filters.prompt));
  return next;
}

/** Whether anything narrows the list (the order and the page do not). */
export function isFiltered(filters: SampleFilters): boolean {
  return BOUNDS.some((b) => filters[b].trim() !== "") || filters.q !== "";
}

/** Filters off, order and page kept as they are. */
export function clearedFilters(filters: SampleFilters): SampleFilters {
  return { ...filters, ...Object.fromEntries(BOUNDS.map((b) => [b, ""])), q: "", page: 0 };
}

export type SampleQuery = Partial<Record<Bound, number>> & {
  limit: number;
  offset?: number;
  q?: string;
  order?: SampleOrder;
};

export interface QueryPlan {
  /** What to ask GET /runs/{id}/samples for; null while a bound is not a number. */
  query: SampleQuery | null;
  /** Why a bound cannot be sent, by bound. */
  problems: Partial<Record<Bound, string>>;
}

const INTEGER = /^\d+$/;
const NUMBER = /^-?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

function parseBound(bound: Bound, text: string): number | string {
  if (bound.endsWith("_reward")) {
    const value = Number(text);
    return NUMBER.test(text) && Number.isFinite(value) ? value : "a number, such as 0.5";
  }
  const value = Number(text);
  const limit = bound.endsWith("_tokens") ? 2 ** 31 - 1 : Number.MAX_SAFE_INTEGER;
  return INTEGER.test(text) && value <= limit ? value : "a whole number, 0 or more";
}

/**
 * The API query for `filters`, or what is wrong with them. Checked here as the API checks
 * them, so that a half-typed bound says so beside its box instead of failing the whole list.
 */
export function queryFor(filters: SampleFilters, pageSize: number): QueryPlan {
  const query: SampleQuery = { limit: pageSize };
  const problems: Partial<Record<Bound, string>> = {};
  for (const bound of BOUNDS) {
    const text = filters[bound].trim();
    if (!text) continue;
    const value = parseBound(bound, text);
    if (typeof value === "string") problems[bound] = value;
    else query[bound] = value;
  }
  for (const [low, high] of [
    ["min_step", "max_step"],
    ["min_reward", "max_reward"],
    ["min_tokens", "max_tokens"],
  ] as const) {
    const lo = query[low];
    const hi = query[high];
    if (lo !== undefined && hi !== undefined && lo > hi) problems[high] = `at least the lower bound (${lo})`;
  }
  if (filters.q) query.q = filters.q;
  if (filters.order !== DEFAULT_ORDER) query.order = filters.order;
  if (filters.page > 0) query.offset = filters.page * pageSize;
  return Object.keys(problems).length > 0 ? { query: null, problems } : { query, problems };
}

/** Whether `query` is the run page's plain newest page (the one `samples.added` refreshes). */
export function isNewestPage(query: SampleQuery): boolean {
  return Object.keys(query).every((k) => k === "limit");
}

// ------------------------------------------------------------ text

export interface Segment {
  text: string;
  match: boolean;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function searchPattern(q: string): RegExp | null {
  return q ? new RegExp(escapeRegExp(q), "giu") : null;
}

/** `text` cut into the stretches that match `q` (case-insensitively, as the API searches) and the rest. */
export function highlight(text: string, q: string): Segment[] {
  const pattern = searchPattern(q);
  if (!pattern || !text) return text ? [{ text, match: false }] : [];
  const segments: Segment[] = [];
  let at = 0;
  for (const m of text.matchAll(pattern)) {
    const start = m.index;
    if (start > at) segments.push({ text: text.slice(at, start), match: false });
    segments.push({ text: m[0], match: true });
    at = start + m[0].length;
  }
  if (at < text.length) segments.push({ text: text.slice(at), match: false });
  return segments;
}

export interface Collapsed {
  /** The stretches shown, in order; "…" goes between them and after the last. */
  parts: string[];
  /** Whether anything is left out. */
  collapsed: boolean;
}

export interface CollapseLimits {
  chars: number;
  lines: number;
}

/** How far a collapsed stretch's edge moves to fall between words. */
const WORD = 24;

/** The first `lines` lines of `text`, at most `chars` characters. */
function head(text: string, { chars, lines }: CollapseLimits): string {
  let cut = Math.min(text.length, chars);
  let newline = -1;
  for (let i = 0; i < lines; i++) {
    newline = text.indexOf("\n", newline + 1);
    if (newline < 0) break;
  }
  if (newline >= 0) cut = Math.min(cut, newline);
  return text.slice(0, cut);
}

/**
 * What a collapsed cell shows of `text`: its head, and, when the first match of the search
 * lies past it, a stretch around that match too — a search hit must be visible without
 * expanding every long response.
 */
export function collapse(text: string, q: string, limits: CollapseLimits): Collapsed {
  const start = head(text, limits);
  if (start.length === text.length) return { parts: [text], collapsed: false };
  const pattern = searchPattern(q);
  const hit = pattern ? pattern.exec(text) : null;
  if (!hit || hit.index + hit[0].length <= start.length) return { parts: [start], collapsed: true };
  const half = { chars: Math.floor(limits.chars / 2), lines: Math.max(1, Math.floor(limits.lines / 2)) };
  const shortHead = head(text, half);
  const context = Math.floor(limits.chars / 4);
  const hitEnd = hit.index + hit[0].length;
  let from = Math.max(shortHead.length, hit.index - context);
  let to = Math.min(text.length, hitEnd + context);
  // Cut at spaces near the edges, so the stretch starts and ends on whole words.
  const lead = text.slice(from, hit.index).search(/\s/);
  if (from > shortHead.length && lead >= 0 && lead < WORD) from += lead + 1;
  const tail = text.slice(hitEnd, to);
  const trail = tail.search(/\s\S*$/);
  if (to < text.length && trail >= 0 && tail.length - trail < WORD) to = hitEnd + trail;
  const around = text.slice(from, to);
  // Adjacent stretches are one stretch: no "…" where nothing is left out.
  const parts = from === shortHead.length ? [shortHead + around] : [shortHead, around];
  return { parts, collapsed: to < text.length || parts.length > 1 };
}

// ------------------------------------------------------------ a sample's extras

/** The reward's parts the job sent (`extra.parts`: reward function → value), finite ones. */
export function rewardParts(extra: unknown): [string, number][] {
  if (extra === null || typeof extra !== "object" || Array.isArray(extra)) return [];
  const parts = (extra as Record<string, unknown>).parts;
  if (parts === null || typeof parts !== "object" || Array.isArray(parts)) return [];
  return Object.entries(parts as Record<string, unknown>).filter(
    (entry): entry is [string, number] => typeof entry[1] === "number" && Number.isFinite(entry[1]),
  );
}

/** One turn of an agent episode (`extra.turns`, written by the GRPO recipe's agent episodes). */
export interface AgentTurn {
  role: "model" | "tool";
  text: string;
  /** A tool turn's tool, what became of the call (ok, program_error, timeout, format, …) and its time. */
  tool?: string;
  kind?: string;
  ms?: number;
}

/** An agent episode's turns, in order; [] for a single-turn sample or an `extra` of another shape. */
export function agentTurns(extra: unknown): AgentTurn[] {
  if (extra === null || typeof extra !== "object" || Array.isArray(extra)) return [];
  const turns = (extra as Record<string, unknown>).turns;
  if (!Array.isArray(turns)) return [];
  const out: AgentTurn[] = [];
  for (const t of turns) {
    if (t === null || typeof t !== "object") return [];
    const { role, text, tool, kind, ms } = t as Record<string, unknown>;
    if ((role !== "model" && role !== "tool") || typeof text !== "string") return [];
    out.push({
      role,
      text,
      ...(typeof tool === "string" ? { tool } : {}),
      ...(typeof kind === "string" ? { kind } : {}),
      ...(typeof ms === "number" && Number.isFinite(ms) ? { ms } : {}),
    });
  }
  return out;
}

/** Whether the response hit the length limit (`extra.truncated`). */
export function wasTruncated(extra: unknown): boolean {
  return extra !== null && typeof extra === "object" && (extra as Record<string, unknown>).truncated === true;
}

function rewardNumber(reward: Sample["reward"]): number | null {
  return typeof reward === "number" && Number.isFinite(reward) ? reward : null;
}

// ------------------------------------------------------------ one prompt across versions

export interface VersionStep {
  sample: Sample;
  /** Change from the sample before it (earlier step); null for the first or where either is missing. */
  rewardChange: number | null;
  tokensChange: number | null;
  /** The same response as the sample before it. */
  unchanged: boolean;
}

/** One prompt's samples, oldest step first, each with what changed since the one before. */
export function acrossVersions(samples: readonly Sample[]): VersionStep[] {
  const sorted = [...samples].sort((a, b) => a.step - b.step || a.id - b.id);
  return sorted.map((sample, i) => {
    const before = i > 0 ? sorted[i - 1] : undefined;
    const reward = rewardNumber(sample.reward);
    const earlierReward = before ? rewardNumber(before.reward) : null;
    const tokens = sample.response_tokens;
    const earlierTokens = before?.response_tokens ?? null;
    return {
      sample,
      rewardChange: reward !== null && earlierReward !== null ? reward - earlierReward : null,
      tokensChange: tokens !== null && earlierTokens !== null ? tokens - earlierTokens : null,
      unchanged: before !== undefined && before.response === sample.response,
    };
  });
}

export interface Trend {
  first: number;
  last: number;
}

/** The first and last finite values of `values`, or null when there are fewer than two. */
function trend(values: readonly (number | null)[]): Trend | null {
  const known = values.filter((v): v is number => v !== null);
  const first = known[0];
  const last = known[known.length - 1];
  return known.length >= 2 && first !== undefined && last !== undefined ? { first, last } : null;
}

/** How reward and response length moved over a prompt's samples (oldest step first). */
export function promptTrend(steps: readonly VersionStep[]): { reward: Trend | null; tokens: Trend | null } {
  return {
    reward: trend(steps.map((s) => rewardNumber(s.sample.reward))),
    tokens: trend(steps.map((s) => s.sample.response_tokens)),
  };
}

/** "+0.25", "−3", "±0": a change, signed. */
export function formatChange(change: number, digits = 0): string {
  if (change === 0) return "±0";
  const text = Math.abs(change).toFixed(digits);
  return change > 0 ? `+${text}` : `−${text}`;
}

/** "41–80 of 230"; "0 samples" when empty. */
export function pageLabel(page: number, pageSize: number, shown: number, count: number): string {
  if (count === 0 || shown === 0) return `${count} samples`;
  const first = page * pageSize + 1;
  return `${first}–${first + shown - 1} of ${count.toLocaleString("en-US")}`;
}
