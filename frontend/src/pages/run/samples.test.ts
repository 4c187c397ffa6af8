import { QueryClient, QueryObserver } from "@tanstack/react-query";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { queryKeys } from "../../api/queryKeys";
import { applyRunMessage } from "./live";
import { checkpointMetric, formatReward, SAMPLES_REFRESH_MS } from "./samples";

describe("formatReward", () => {
  it("shows integers plainly, fractions to three places, and non-finite strings as sent", () => {
    expect(formatReward(1)).toBe("1");
    expect(formatReward(0.12345)).toBe("0.123");
    expect(formatReward("NaN")).toBe("NaN");
    expect(formatReward(null)).toBe("–");
  });
});

describe("checkpointMetric", () => {
  it("reads a key of a checkpoint's metrics object, and nothing from anything else", () => {
    expect(checkpointMetric({ "reward/mean": 0.5 }, "reward/mean")).toBe(0.5);
    expect(checkpointMetric({ "reward/mean": "NaN" }, "reward/mean")).toBe("NaN");
    expect(checkpointMetric({}, "reward/mean")).toBeUndefined();
    expect(checkpointMetric(null, "reward/mean")).toBeUndefined();
    expect(checkpointMetric([1, 2], "0")).toBeUndefined();
  });
});

describe("live samples on the run page", () => {
  /**
   * The samples query as the page holds it (an observer, as useSamples is), fed by a job that
   * stores samples every second, twice 100 ms apart (as the GRPO recipe's reporter posts them),
   * while each fetch takes 300 ms. Counts the fetches and the aborted ones.
   */
  async function watchSamplesFor(seconds: number) {
    const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } });
    let fetches = 0;
    let aborted = 0;
    let stored = 0;
    const lastFetchSaw: number[] = [];
    const observer = new QueryObserver(qc, {
      queryKey: queryKeys.samples(5),
      queryFn: ({ signal }) => {
        fetches += 1;
        const saw = stored;
        signal.addEventListener("abort", () => (aborted += 1));
        return new Promise((resolve) =>
          setTimeout(() => {
            lastFetchSaw.push(saw);
            resolve({ count: saw, next: null, previous: null, results: [] });
          }, 300),
        );
      },
      staleTime: Number.POSITIVE_INFINITY,
    });
    const unsubscribe = observer.subscribe(() => {});
    await vi.advanceTimersByTimeAsync(1000);
    for (let second = 0; second < seconds; second++) {
      for (const gap of [0, 100]) {
        await vi.advanceTimersByTimeAsync(gap);
        stored += 1;
        applyRunMessage(qc, 5, { type: "samples.added", run_id: 5, count: 4, steps: [second] });
      }
      await vi.advanceTimersByTimeAsync(900);
    }
    await vi.advanceTimersByTimeAsync(10_000); // the run stops; the page stays open
    unsubscribe();
    return { fetches, aborted, stored, lastSaw: lastFetchSaw.at(-1) };
  }

  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it("refetches a few times a minute, never aborts a fetch, and ends with every sample", async () => {
    const { fetches, aborted, stored, lastSaw } = await watchSamplesFor(60);
    expect(aborted).toBe(0);
    // The first fetch, then at most one per refresh window, and one more after the last event.
    expect(fetches).toBeLessThanOrEqual(1 + Math.ceil(60_000 / SAMPLES_REFRESH_MS) + 1);
    expect(lastSaw).toBe(stored);
  });
});
