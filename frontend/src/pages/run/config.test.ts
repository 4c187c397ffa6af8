import { describe, expect, it } from "vitest";

import { configPanel } from "./config";

describe("the config panel", () => {
  it("shows an external run's MLflow params where the config goes", () => {
    const run = { recipe: "external", config: {}, params: { "actor/lr": "1e-06", "data/batch": "64" } };
    expect(configPanel(run)).toEqual({ title: "Params (2, logged through MLflow)", value: run.params });
  });

  it("keeps a dispatched run's resolved config, whatever params it also logged", () => {
    const run = { recipe: "grpo", config: { steps: 100 }, params: { "actor/lr": "1e-06" } };
    expect(configPanel(run)).toEqual({ title: "Config", value: { steps: 100 } });
  });
});
