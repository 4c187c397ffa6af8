import { act, renderHook } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { useThrottled } from "./throttle";

describe("useThrottled", () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] }));
  afterEach(() => vi.useRealTimers());

  it("shows a burst of changes once a period, ending on the latest", () => {
    const { result, rerender } = renderHook(({ value, key }) => useThrottled(value, 1000, key), {
      initialProps: { value: 1, key: "a" },
    });
    expect(result.current).toBe(1);
    act(() => vi.advanceTimersByTime(1500));
    rerender({ value: 2, key: "a" }); // a second since the last change: at once
    act(() => vi.advanceTimersByTime(0));
    expect(result.current).toBe(2);
    rerender({ value: 3, key: "a" });
    act(() => vi.advanceTimersByTime(300));
    rerender({ value: 4, key: "a" });
    act(() => vi.advanceTimersByTime(300));
    expect(result.current).toBe(2); // held: the last change was 600 ms ago
    act(() => vi.advanceTimersByTime(400));
    expect(result.current).toBe(4); // the latest, a second after the last change; 3 never shown
  });

  it("shows a new key's value at once", () => {
    const { result, rerender } = renderHook(({ value, key }) => useThrottled(value, 1000, key), {
      initialProps: { value: "x", key: "a" },
    });
    rerender({ value: "y", key: "b" });
    expect(result.current).toBe("y");
    act(() => vi.advanceTimersByTime(0));
    rerender({ value: "z", key: "b" });
    expect(result.current).toBe("y");
    act(() => vi.advanceTimersByTime(1000));
    expect(result.current).toBe("z");
  });
});
