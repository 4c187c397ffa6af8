import { describe, expect, it } from "vitest";

import { filtersFrom, kindLabel } from "./format";

describe("the alert feed's helpers", () => {
  it.each([
    ["nan_inf", "NaN/Inf in loss or gradients"],
    ["no_signal", "no learning signal"],
    ["new_kind", "new kind"],
    ["toString", "toString"],
  ])("names the kind %s in words (an unknown one by its name)", (kind, words) => {
    expect(kindLabel(kind)).toBe(words);
  });

  it("reads the filters from the query string, anything unknown as all", () => {
    expect(filtersFrom(new URLSearchParams("state=open&kind=kl_spike"))).toEqual({ state: "open", kind: "kl_spike" });
    expect(filtersFrom(new URLSearchParams("state=acknowledged"))).toEqual({ state: "acknowledged", kind: "" });
    expect(filtersFrom(new URLSearchParams("state=maybe&kind=constructor"))).toEqual({ state: "", kind: "" });
  });
});
