import { RUN_STATUSES, type RunStatus } from "../../api/types";
import type { RunTableParams } from "./api";

export const PAGE_SIZE = 50;
/** Metric columns at most (the API takes ten). */
export const MAX_COLUMNS = 10;
export const DEFAULT_SORT = "-created_at";

/**
 * The runs table's view, kept in the URL so a view can be bookmarked, shared and reloaded:
 * filters, search, sort, metric columns and page.
 */
export interface RunsFilters {
  status: RunStatus | null;
  /** Search: every word in the name, recipe, project, team, owner or a tag; `#12` is run 12. */
  q: string;
  /** Zero-based page. */
  page: number;
  /** `-created_at`, `name`, `metric:reward/mean`...: a field, `-` first for descending. */
  sort: string;
  /** Metric columns; null when the URL names none (the page then uses the remembered ones). */
  metrics: string[] | null;
  /** Only this project's runs (an MLflow experiment link leads here). */
  project?: number;
  /** Only this group's runs. */
  group?: number;
  recipe?: string;
  /** Substring of the name (links from elsewhere use it). */
  name?: string;
}

export const NO_FILTERS: RunsFilters = { status: null, q: "", page: 0, sort: DEFAULT_SORT, metrics: null };

export function isRunStatus(value: string | null): value is RunStatus {
  return value !== null && (RUN_STATUSES as readonly string[]).includes(value);
}

function positiveInt(text: string | null): number | undefined {
  const n = Number(text ?? "");
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

export function filtersFromSearch(search: URLSearchParams): RunsFilters {
  const status = search.get("status");
  const metrics = search.get("metrics");
  const filters: RunsFilters = {
    status: isRunStatus(status) ? status : null,
    q: search.get("q") ?? "",
    page: positiveInt(search.get("page")) ?? 0,
    sort: search.get("sort") || DEFAULT_SORT,
    metrics: metrics === null ? null : splitKeys(metrics),
  };
  const project = positiveInt(search.get("project"));
  const group = positiveInt(search.get("group"));
  if (project) filters.project = project;
  if (group) filters.group = group;
  const recipe = search.get("recipe");
  if (recipe) filters.recipe = recipe;
  const name = search.get("name");
  if (name) filters.name = name;
  return filters;
}

export function splitKeys(text: string): string[] {
  return [...new Set(text.split(",").map((k) => k.trim()).filter(Boolean))].slice(0, MAX_COLUMNS);
}

export function filtersToSearch(filters: RunsFilters): URLSearchParams {
  const search = new URLSearchParams();
  if (filters.status) search.set("status", filters.status);
  if (filters.q.trim()) search.set("q", filters.q.trim());
  if (filters.name?.trim()) search.set("name", filters.name.trim());
  if (filters.recipe) search.set("recipe", filters.recipe);
  if (filters.project) search.set("project", String(filters.project));
  if (filters.group) search.set("group", String(filters.group));
  if (filters.sort !== DEFAULT_SORT) search.set("sort", filters.sort);
  if (filters.metrics !== null) search.set("metrics", filters.metrics.join(","));
  if (filters.page > 0) search.set("page", String(filters.page));
  return search;
}

/** What the table asks the API for, with the columns actually shown. */
export function tableParams(filters: RunsFilters, columns: readonly string[], pageSize = PAGE_SIZE): RunTableParams {
  const params: RunTableParams = { limit: pageSize, offset: filters.page * pageSize };
  if (filters.status) params.status = filters.status;
  const q = filters.q.trim();
  if (q) params.q = q;
  const name = filters.name?.trim();
  if (name) params.name = name;
  if (filters.recipe) params.recipe = filters.recipe;
  if (filters.project) params.project = filters.project;
  if (filters.group) params.group = filters.group;
  if (filters.sort !== DEFAULT_SORT) params.sort = filters.sort;
  if (columns.length) {
    params.metrics = columns.join(",");
    params.spark = SPARK_POINTS;
  }
  return params;
}

export const SPARK_POINTS = 30;

/** The sort a column header asks for: descending first for numbers and dates, then flipped. */
export function nextSort(current: string, field: string, descendingFirst: boolean): string {
  if (current === field) return `-${field}`;
  if (current === `-${field}`) return field;
  return descendingFirst ? `-${field}` : field;
}

/** "▲" / "▼" for the sorted column, "" for the others. */
export function sortMark(current: string, field: string): string {
  if (current === field) return "▲";
  if (current === `-${field}`) return "▼";
  return "";
}

/** "51–100 of 230"; "0 runs" when empty. */
export function pageLabel(page: number, pageSize: number, shown: number, count: number): string {
  if (count === 0 || shown === 0) return `${count} runs`;
  const first = page * pageSize + 1;
  return `${first}–${first + shown - 1} of ${count}`;
}

export function pageCount(count: number, pageSize = PAGE_SIZE): number {
  return Math.max(1, Math.ceil(count / pageSize));
}

/** The metric columns to show: the URL's, else the remembered ones, else reward/mean when some run reports it. */
export function chosenColumns(
  fromUrl: string[] | null,
  remembered: string[] | null,
  available: readonly string[] | undefined,
): string[] {
  if (fromUrl !== null) return fromUrl;
  if (remembered !== null) return remembered;
  return available?.includes("reward/mean") ? ["reward/mean"] : [];
}

// ------------------------------------------------------------ saved views (this browser)

export interface SavedView {
  name: string;
  /** The view's URL query, without `page`. */
  search: string;
}

const VIEWS_KEY = "barrel.runViews";
const COLUMNS_KEY = "barrel.runColumns";

function readJson(key: string): unknown {
  try {
    return JSON.parse(globalThis.localStorage?.getItem(key) ?? "null");
  } catch {
    return null;
  }
}

export function loadViews(): SavedView[] {
  const stored = readJson(VIEWS_KEY);
  if (!Array.isArray(stored)) return [];
  return stored.filter(
    (v): v is SavedView =>
      typeof v === "object" && v !== null && typeof v.name === "string" && typeof v.search === "string",
  );
}

/** The views with `view` saved (replacing one of the same name), newest first. */
export function saveView(views: readonly SavedView[], view: SavedView): SavedView[] {
  const next = [view, ...views.filter((v) => v.name !== view.name)];
  globalThis.localStorage?.setItem(VIEWS_KEY, JSON.stringify(next));
  return next;
}

export function deleteView(views: readonly SavedView[], name: string): SavedView[] {
  const next = views.filter((v) => v.name !== name);
  globalThis.localStorage?.setItem(VIEWS_KEY, JSON.stringify(next));
  return next;
}

export function loadColumns(): string[] | null {
  const stored = readJson(COLUMNS_KEY);
  return Array.isArray(stored) && stored.every((k) => typeof k === "string") ? stored.slice(0, MAX_COLUMNS) : null;
}

export function rememberColumns(columns: readonly string[]): void {
  globalThis.localStorage?.setItem(COLUMNS_KEY, JSON.stringify(columns));
}

/** The saved view's search without the page, so it opens at the first page. */
export function viewSearch(filters: RunsFilters, columns: readonly string[]): string {
  return filtersToSearch({ ...filters, page: 0, metrics: [...columns] }).toString();
}

// ------------------------------------------------------------ sparklines

/**
 * An SVG polyline's points for `values` in a `width` × `height` box (y up), skipping
 * non-finite values; null when fewer than two finite points.
 */
export function sparkPath(values: readonly number[], width: number, height: number): string | null {
  const finite = values.map((v, i) => [i, v] as const).filter(([, v]) => Number.isFinite(v));
  if (finite.length < 2) return null;
  let lo = Infinity;
  let hi = -Infinity;
  for (const [, v] of finite) {
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  const span = hi - lo || 1;
  const last = values.length - 1 || 1;
  const pad = 1;
  return finite
    .map(([i, v]) => {
      const x = (i / last) * width;
      const y = pad + (1 - (hi === lo ? 0.5 : (v - lo) / span)) * (height - 2 * pad);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    })
    .join(" ");
}
