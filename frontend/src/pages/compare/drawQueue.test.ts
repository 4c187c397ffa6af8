import { describe, expect, it } from "vitest";

import { DrawQueue } from "./drawQueue";

function fakeFrames() {
  let time = 0;
  const frames: (() => void)[] = [];
  return {
    scheduler: { now: () => time, frame: (run: () => void) => void frames.push(run) },
    advance: (ms: number) => (time += ms),
    /** Run the next frame; false when none is scheduled. */
    step: () => {
      const run = frames.shift();
      run?.();
      return run !== undefined;
    },
    pending: () => frames.length,
  };
}

describe("draw queue", () => {
  it("draws charts until a frame's budget is spent, the rest in the next frames", () => {
    const frames = fakeFrames();
    const queue = new DrawQueue(frames.scheduler, 8);
    const drawn: string[] = [];
    const owners = ["a", "b", "c"].map((name) => ({ name }));
    for (const owner of owners) {
      queue.add(owner, () => {
        drawn.push(owner.name);
        frames.advance(5); // each draw takes 5 ms: two fit in a budget of 8
      });
    }
    expect(drawn).toEqual([]); // nothing before a frame
    expect(frames.pending()).toBe(1); // one frame asked for, however many charts
    frames.step();
    expect(drawn).toEqual(["a", "b"]);
    frames.step();
    expect(drawn).toEqual(["a", "b", "c"]);
    expect(frames.step()).toBe(false);
  });

  it("always draws one chart a frame, even one slower than the budget", () => {
    const frames = fakeFrames();
    const queue = new DrawQueue(frames.scheduler, 8);
    let count = 0;
    for (let i = 0; i < 3; i++) queue.add({}, () => (count += 1, frames.advance(20)));
    frames.step();
    expect(count).toBe(1);
    frames.step();
    frames.step();
    expect(count).toBe(3);
  });

  it("draws a chart queued twice once, with the newest data, in its first place", () => {
    const frames = fakeFrames();
    const queue = new DrawQueue(frames.scheduler, 100);
    const drawn: string[] = [];
    const a = {};
    const b = {};
    queue.add(a, () => drawn.push("a1"));
    queue.add(b, () => drawn.push("b"));
    queue.add(a, () => drawn.push("a2"));
    frames.step();
    expect(drawn).toEqual(["a2", "b"]);
  });

  it("drops a cancelled draw, but not a newer one of the same chart", () => {
    const frames = fakeFrames();
    const queue = new DrawQueue(frames.scheduler, 100);
    const drawn: string[] = [];
    const a = {};
    const cancelOld = queue.add(a, () => drawn.push("old"));
    queue.add(a, () => drawn.push("new"));
    cancelOld();
    const cancelB = queue.add({}, () => drawn.push("b"));
    cancelB();
    frames.step();
    expect(drawn).toEqual(["new"]);
    expect(queue.size).toBe(0);
  });
});
