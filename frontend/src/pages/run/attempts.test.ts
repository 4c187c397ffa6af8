import { describe, expect, it } from "vitest";

import { sandboxRecord, shortCode, waitingParts } from "./attempts";

describe("shortCode", () => {
  it("shortens a commit hash and keeps anything else", () => {
    expect(shortCode("bbcd5bcbf9a385f24216e1cd37355f8b0a3bb360")).toBe("bbcd5bcbf9a3");
    expect(shortCode("488a450312d018e1c55dd006aac42c9dd5a74c70-dirty")).toBe("488a450312d0-dirty");
    expect(shortCode("v1.2.0-dirty")).toBe("v1.2.0-dirty");
    expect(shortCode("")).toBe("–");
    expect(shortCode(null)).toBe("–");
  });
});

describe("waitingParts", () => {
  it("splits a resources note into a title and what is waited for", () => {
    expect(waitingParts("waiting for cluster resources: 2 tasks need {CPU: 1}; 0.5 of 2 CPU free")).toEqual({
      title: "Waiting for cluster resources",
      detail: "2 tasks need {CPU: 1}; 0.5 of 2 CPU free",
    });
    expect(waitingParts("waiting for something else")).toEqual({ title: "Waiting for something else", detail: "" });
  });
});

describe("sandboxRecord", () => {
  it("reads the tier, and makes a fallback stand out with why", () => {
    expect(sandboxRecord({ tier: "bubblewrap", reason_for_fallback: "", unavailable: "", not_enforced: [] })).toEqual({
      tier: "bubblewrap",
      fallback: false,
      detail: "",
    });
    expect(
      sandboxRecord({ tier: "rlimits", reason_for_fallback: "bwrap: no user namespaces", not_enforced: ["network", "filesystem"] }),
    ).toEqual({ tier: "rlimits", fallback: true, detail: "bwrap: no user namespaces; not enforced: network, filesystem" });
    expect(sandboxRecord({ tier: "bubblewrap", unavailable: "bwrap not found" })).toEqual({
      tier: "none",
      fallback: true,
      detail: "bwrap not found",
    });
  });

  it("is null for a run that runs no code, or a record of another shape", () => {
    expect(sandboxRecord({})).toBeNull();
    expect(sandboxRecord(null)).toBeNull();
    expect(sandboxRecord(["bubblewrap"])).toBeNull();
    expect(sandboxRecord({ tier: 2 })).toBeNull();
  });
});
