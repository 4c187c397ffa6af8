import type { RunDetail } from "../../api/types";

/** The recipe of runs created through the MLflow API: nothing dispatches them. */
export const EXTERNAL_RECIPE = "external";

/** What the run page shows where a run's configuration goes: the resolved config of a run
 * Barrel dispatched, and for an external run (whose config is empty) the params its trainer
 * logged through MLflow. */
export function configPanel(run: Pick<RunDetail, "recipe" | "config" | "params">): {
  title: string;
  /** Shown as JSON; the schema types a run's config as any JSON value. */
  value: unknown;
} {
  if (run.recipe === EXTERNAL_RECIPE) {
    const count = Object.keys(run.params).length;
    return { title: `Params (${count}, logged through MLflow)`, value: run.params };
  }
  return { title: "Config", value: run.config };
}
