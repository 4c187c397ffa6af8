import { RUN_STATUSES, type RunListParams, type RunStatus } from "../../api/types";

export const PAGE_SIZE = 50;

/** The runs table's filters, kept in the URL so a filtered view can be shared and reloaded. */
export interface RunsFilters {
  status: RunStatus | null;
  name: string;
  /** Zero-based page. */
  page: number;
  /** Only this project's runs (an MLflow experiment link leads here). */
  project?: number;
}

export function isRunStatus(value: string | null): value is RunStatus {
  return value !== null && (RUN_STATUSES as readonly string[]).includes(value);
}

export function filtersFromSearch(search: URLSearchParams): RunsFilters {
  const status = search.get("status");
  const page = Number.parseInt(search.get("page") ?? "", 10);
  const project = Number(search.get("project") ?? "");
  return {
    status: isRunStatus(status) ? status : null,
    name: search.get("name") ?? "",
    page: Number.isFinite(page) && page > 0 ? page : 0,
    ...(Number.isInteger(project) && project > 0 ? { project } : {}),
  };
}

export function filtersToSearch(filters: RunsFilters): URLSearchParams {
  const search = new URLSearchParams();
  if (filters.status) search.set("status", filters.status);
  if (filters.name.trim()) search.set("name", filters.name.trim());
  if (filters.page > 0) search.set("page", String(filters.page));
  if (filters.project) search.set("project", String(filters.project));
  return search;
}

export function listParams(filters: RunsFilters, pageSize = PAGE_SIZE): RunListParams {
  const params: RunListParams = { limit: pageSize, offset: filters.page * pageSize };
  if (filters.status) params.status = filters.status;
  const name = filters.name.trim();
  if (name) params.name = name;
  if (filters.project) params.project = filters.project;
  return params;
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
