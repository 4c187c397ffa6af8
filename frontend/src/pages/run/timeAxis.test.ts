import { describe, expect, it } from "vitest";

import { livePointsFromWire, mergePoints, seriesFromWire, type Series } from "../../api/metrics";
import {
  DEFAULT_VIEW,
  ELAPSED_INCREMENTS,
  formatElapsed,
  formatElapsedValue,
  plotted,
  stepsOfXRange,
  timeOrigin,
  viewFrom,
  xMapOf,
  xOfStep,
  zoomSteps,
  type ChartView,
} from "./charts";

const T0 = 1_764_504_000;

function timed(step: number[], time: (number | null)[], mean: number[] = step.map((s) => s / 10)): Series {
  return { key: "k", count: step.length, step, min: mean, max: mean, mean, last: mean, time };
}

const relative: ChartView = { ...DEFAULT_VIEW, xAxis: "relative" };
const wall: ChartView = { ...DEFAULT_VIEW, xAxis: "wall" };

describe("the step → time map", () => {
  it("is the step itself against steps, the time (less the origin for relative time) against time", () => {
    const s = timed([0, 10, 20], [T0 + 5, T0 + 65, T0 + 125]);
    expect(xMapOf(s, "step", T0)).toEqual({ steps: [0, 10, 20], xs: [0, 10, 20] });
    expect(xMapOf(s, "relative", T0)).toEqual({ steps: [0, 10, 20], xs: [5, 65, 125] });
    expect(xMapOf(s, "wall", T0)).toEqual({ steps: [0, 10, 20], xs: [T0 + 5, T0 + 65, T0 + 125] });
  });

  it("leaves out steps whose point has no time, and a series read without times is empty against time", () => {
    expect(xMapOf(timed([0, 10, 20], [T0, null, T0 + 9]), "wall", null)).toEqual({ steps: [0, 20], xs: [T0, T0 + 9] });
    const { time: _, ...plain } = timed([0, 1], [T0, T0]);
    expect(xMapOf(plain, "relative", T0)).toEqual({ steps: [], xs: [] });
  });

  it("counts relative time from the run's earliest point of any key", () => {
    expect(timeOrigin([timed([0, 1], [T0 + 3, T0 + 4]), timed([5], [null]), timed([2, 9], [T0 + 1, T0 + 2])])).toBe(T0 + 1);
    expect(timeOrigin([timed([0], [null])])).toBeNull();
  });

  it("places a step at its point's time, between points by interpolation, nowhere beyond them", () => {
    const map = xMapOf(timed([0, 10, 20], [T0, T0 + 100, T0 + 300]), "relative", T0);
    expect(xOfStep(map, 10)).toBe(100);
    expect(xOfStep(map, 15)).toBe(200);
    expect(xOfStep(map, 2)).toBe(20);
    expect(xOfStep(map, 21)).toBeNull();
    expect(xOfStep(xMapOf(timed([5, 10], [T0, T0 + 1]), "relative", T0), 4)).toBeNull();
    expect(xOfStep({ steps: [], xs: [] }, 0)).toBeNull();
  });
});

describe("plotted against time", () => {
  it("plots x = time since the origin with the step of each point beside it", () => {
    const p = plotted(timed([0, 10, 20], [T0, T0 + 60, T0 + 600], [1, 2, 3]), relative, T0);
    expect(p.data[0]).toEqual([0, 60, 600]);
    expect(p.data[1]).toEqual([1, 2, 3]);
    expect(p.steps).toEqual([0, 10, 20]);
  });

  it("drops points without a time and sorts by time a step re-logged later (a resumed run)", () => {
    // Steps 10 and 20 were logged again after a resume from step 5, later than step 30 first was.
    const p = plotted(timed([0, 10, 20, 30, 40], [T0, T0 + 500, T0 + 600, T0 + 300, null], [1, 2, 3, 4, 5]), wall, null);
    expect(p.data[0]).toEqual([T0, T0 + 300, T0 + 500, T0 + 600]);
    expect(p.data[1]).toEqual([1, 4, 2, 3]);
    expect(p.steps).toEqual([0, 30, 10, 20]);
    // The map stays in step order, for placing marks.
    expect(p.map.steps).toEqual([0, 10, 20, 30]);
  });

  it("is the step chart as it was against steps", () => {
    const s = timed([0, 10], [T0, T0 + 1], [1, 2]);
    const p = plotted(s, DEFAULT_VIEW, T0);
    expect(p.data[0]).toEqual([0, 10]);
    expect(p.steps).toEqual([0, 10]);
  });
});

describe("zooming against time", () => {
  const map = xMapOf(timed([0, 10, 20, 30], [T0, T0 + 100, T0 + 200, T0 + 300]), "relative", T0);

  it("asks for the steps of the points in the dragged range and of those just outside it", () => {
    expect(stepsOfXRange(map, 90, 210)).toEqual([0, 30]);
    expect(stepsOfXRange(map, 100, 200)).toEqual([10, 20]);
    // Between two points: the two of them.
    expect(stepsOfXRange(map, 120, 180)).toEqual([10, 20]);
    expect(stepsOfXRange(map, 250, 400)).toEqual([20, 30]);
    expect(stepsOfXRange(map, 5, 1)).toBeNull();
    expect(stepsOfXRange({ steps: [], xs: [] }, 0, 1)).toBeNull();
  });

  it("is no zoom when the range shows every point of the overview", () => {
    const s = timed([0, 10, 20, 30], [T0, T0 + 100, T0 + 200, T0 + 300]);
    expect(zoomSteps(s, map, "relative", T0, 0, 300)).toBeNull();
    expect(zoomSteps(s, map, "relative", T0, -10, 310)).toBeNull();
    expect(zoomSteps(s, map, "relative", T0, 150, 300)).toEqual([10, 30]);
    // Against wall time the overview's xs are the times themselves.
    expect(zoomSteps(s, xMapOf(s, "wall", null), "wall", null, T0 + 150, T0 + 300)).toEqual([10, 30]);
    // Against steps, as before: the whole steps of the range.
    expect(zoomSteps(s, null, "step", null, 1.6, 4.2)).toEqual([1, 5]);
    expect(zoomSteps(s, null, "step", null, 0, 30)).toBeNull();
  });
});

describe("elapsed-time ticks", () => {
  it("labels every tick in one unit, picked by the largest", () => {
    expect(formatElapsed([0, 15, 30, 45])).toEqual(["0s", "15s", "30s", "45s"]);
    expect(formatElapsed([0, 0.5, 1])).toEqual(["0.0s", "0.5s", "1.0s"]);
    expect(formatElapsed([0, 300, 600, 900])).toEqual(["0min", "5min", "10min", "15min"]);
    expect(formatElapsed([0, 90, 180])).toEqual(["0.0min", "1.5min", "3.0min"]);
    expect(formatElapsed([0, 3600, 7200, 10800])).toEqual(["0h", "1h", "2h", "3h"]);
    expect(formatElapsed([0, 43200 * 3])).toEqual(["0h", "36h"]);
  });

  it("gives the legend a time to the second", () => {
    expect(formatElapsedValue(4.25)).toBe("4.25s");
    expect(formatElapsedValue(42.5)).toBe("42.5s");
    expect(formatElapsedValue(725)).toBe("12min 5s");
    expect(formatElapsedValue(12_000)).toBe("3h 20min");
    expect(formatElapsedValue(Number.NaN)).toBe("–");
  });

  it("steps in seconds, minutes and hours as a clock divides them", () => {
    expect(ELAPSED_INCREMENTS).toEqual([...ELAPSED_INCREMENTS].sort((a, b) => a - b));
    for (const spacing of [1, 15, 60, 300, 3600, 86400]) expect(ELAPSED_INCREMENTS).toContain(spacing);
  });
});

describe("the stored view", () => {
  it("keeps a valid x axis and takes the default for anything else", () => {
    expect(viewFrom({ smoothing: 0.3, logScale: true, xAxis: "wall" })).toEqual({ smoothing: 0.3, logScale: true, xAxis: "wall" });
    expect(viewFrom({ smoothing: 0.3, logScale: true })).toEqual({ smoothing: 0.3, logScale: true, xAxis: "step" });
    expect(viewFrom({ xAxis: "epoch", smoothing: "x" })).toEqual(DEFAULT_VIEW);
    expect(viewFrom(null)).toEqual(DEFAULT_VIEW);
  });
});

describe("live points with times", () => {
  it("carry the message's times into a series read with times, aligned with its steps", () => {
    const points = livePointsFromWire([{ key: "k", steps: [5, 1], values: [0.5, 9], times: [T0 + 50, T0 + 11] }]);
    expect(points).toEqual([
      { key: "k", step: 5, value: 0.5, time: T0 + 50 },
      { key: "k", step: 1, value: 9, time: T0 + 11 },
    ]);
    const merged = mergePoints(timed([0, 1, 2], [T0, T0 + 10, T0 + 20]), points);
    expect(merged.step).toEqual([0, 1, 2, 5]);
    expect(merged.time).toEqual([T0, T0 + 11, T0 + 20, T0 + 50]);
    // A series read without times stays without them.
    const { time: _, ...plain } = timed([0], [T0]);
    expect(mergePoints(plain, points).time).toBeUndefined();
    // A key first seen live starts its times.
    expect(mergePoints({ ...plain, step: [], min: [], max: [], mean: [], last: [], count: 0 }, points).time).toEqual([
      T0 + 11,
      T0 + 50,
    ]);
  });

  it("read from the wire keep a time that is no number as none", () => {
    const wire = { key: "k", count: 2, step: [0, 1], min: [1, 2], max: [1, 2], mean: [1, 2], last: [1, 2], time: [T0, null] };
    expect(seriesFromWire(wire).time).toEqual([T0, null]);
    const { time: _, ...plain } = wire;
    expect("time" in seriesFromWire(plain)).toBe(false);
  });
});
