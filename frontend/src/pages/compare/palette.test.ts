import { describe, expect, it } from "vitest";

import { OKABE_ITO, palette, TOL_MUTED, viridis, withAlpha } from "./palette";

describe("palette", () => {
  it("gives Okabe–Ito colours, all different, for up to 8 lines", () => {
    for (let n = 1; n <= 8; n++) {
      const colours = palette(n);
      expect(colours).toHaveLength(n);
      expect(new Set(colours).size).toBe(n);
      expect(colours.every((c) => (OKABE_ITO as readonly string[]).includes(c))).toBe(true);
    }
    expect(palette(0)).toEqual([]);
  });

  it("is stable: the same place in the same list always gets the same colour", () => {
    expect(palette(5)).toEqual(palette(5));
    expect(palette(37)).toEqual(palette(37));
    // Growing the list within a scheme keeps the colours already handed out.
    expect(palette(8).slice(0, 3)).toEqual(palette(3));
  });

  it("switches to Tol's muted for 9 and to the viridis ramp past it", () => {
    expect(palette(9)).toEqual([...TOL_MUTED]);
    const many = palette(40);
    expect(many).toHaveLength(40);
    expect(many.every((c) => /^#[0-9A-F]{6}$/.test(c))).toBe(true);
    // Neighbours in the list are far apart on the ramp, not near-identical.
    expect(many[0]).not.toEqual(many[1]);
    expect(new Set(many).size).toBeGreaterThan(35);
  });

  it("walks viridis from purple to yellow", () => {
    expect(viridis(0)).toBe("#440154");
    expect(viridis(1)).toBe("#FDE725");
    expect(viridis(-3)).toBe(viridis(0));
  });

  it("turns a colour into rgba", () => {
    expect(withAlpha("#0072B2", 0.2)).toBe("rgba(0, 114, 178, 0.2)");
    expect(withAlpha("red", 0.2)).toBe("red");
  });
});
