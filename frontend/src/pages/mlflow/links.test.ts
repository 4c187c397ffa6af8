import { describe, expect, it } from "vitest";

import { mlflowLinkTarget } from "./links";

describe("links the mlflow client prints", () => {
  it("lead to the run's page", () => {
    expect(mlflowLinkTarget("#/experiments/3/runs/9")).toBe("/runs/9");
    expect(mlflowLinkTarget("#/experiments/3/runs/9?workspace=lab")).toBe("/runs/9");
    expect(mlflowLinkTarget("#/experiments/3/runs/9/artifacts")).toBe("/runs/9");
  });

  it("lead to the experiment's runs when they name no run", () => {
    expect(mlflowLinkTarget("#/experiments/3")).toBe("/?project=3");
    expect(mlflowLinkTarget("#/experiments/3?workspace=lab")).toBe("/?project=3");
  });

  it("lead to the runs list otherwise", () => {
    expect(mlflowLinkTarget("")).toBe("/");
    expect(mlflowLinkTarget("#/models")).toBe("/");
    expect(mlflowLinkTarget("#/experiments/3/runs/abc")).toBe("/?project=3");
    expect(mlflowLinkTarget("#/experiments/x")).toBe("/");
  });
});
