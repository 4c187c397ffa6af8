/** The runs table's reads and the group it can make from a selection (GET /runs/table, POST /groups). */
import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

import { apiRequest } from "../../api/client";
import { RUNS_REFETCH_MS } from "../../api/hooks";
import { parseWireFloat, parseWireFloats } from "../../api/nonfinite";
import { queryKeys } from "../../api/queryKeys";
import type { components, operations } from "../../api/schema.gen";

type Schemas = components["schemas"];
export type RunTableParams = NonNullable<operations["runs_table_list"]["parameters"]["query"]>;
export type RunTableRow = Schemas["RunTableRowOut"];
export type RunTablePage = Schemas["PaginatedRunTableRowOutList"];
export type RunTableKey = Schemas["RunTableKey"];
export type RunGroupDetail = Schemas["RunGroupDetail"];

/** A metric cell with its numbers parsed (NaN and ±Infinity arrive as strings). */
export interface MetricCell {
  value: number;
  step: number;
  count: number;
  spark: number[];
}

export function metricCell(row: RunTableRow, key: string): MetricCell | undefined {
  const cell = row.metrics[key];
  if (!cell) return undefined;
  return { value: parseWireFloat(cell.value), step: cell.step, count: cell.count, spark: parseWireFloats(cell.spark) };
}

/** Under ["runs"], so whatever refreshes the runs lists (a submission, a cancel) refreshes the table. */
const tableKey = (params: RunTableParams) => [...queryKeys.runLists, "table", params] as const;
const tableKeysKey = (params: RunTableParams) => [...queryKeys.runLists, "table-keys", params] as const;

export function useRunTable(params: RunTableParams) {
  return useQuery({
    queryKey: tableKey(params),
    queryFn: ({ signal }) => apiRequest<RunTablePage>("/runs/table", { query: { ...params }, signal }),
    placeholderData: keepPreviousData,
    refetchInterval: RUNS_REFETCH_MS,
  });
}

/** The metric keys the filtered runs report, for the column picker; they change slowly. */
export function useRunTableKeys(params: RunTableParams) {
  return useQuery({
    queryKey: tableKeysKey(params),
    queryFn: ({ signal }) =>
      apiRequest<{ keys: RunTableKey[] }>("/runs/table/keys", { query: { ...params }, signal }),
    staleTime: 30_000,
    placeholderData: keepPreviousData,
  });
}

export function useCreateGroup() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: Schemas["GroupCreateRequest"]) =>
      apiRequest<RunGroupDetail>("/groups", { method: "POST", body }),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: queryKeys.groupLists });
      void queryClient.invalidateQueries({ queryKey: queryKeys.runLists });
    },
  });
}
