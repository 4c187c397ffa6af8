import { describe, expect, it } from "vitest";

import { alertSteps } from "./AlertsPanel";

describe("alertSteps", () => {
  it("names one step, a span, or none", () => {
    expect(alertSteps({ first_step: 30, last_step: 30 })).toBe("step 30");
    expect(alertSteps({ first_step: 100, last_step: 160 })).toBe("steps 100–160");
    expect(alertSteps({ first_step: null, last_step: null })).toBe("");
  });
});
