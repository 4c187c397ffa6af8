/**
 * Chart redraws spread over animation frames. A live batch touches a few charts of a hundred
 * lines each, and redrawing all of them in one frame makes that frame several times too long;
 * queued here, each frame redraws charts until its budget is spent (at least one), the others in
 * the next frames. A chart queued again before its turn keeps its place and draws the newest data.
 */
export const FRAME_BUDGET_MS = 8;

export interface Scheduler {
  now: () => number;
  frame: (run: () => void) => void;
}

const browser: Scheduler = {
  now: () => performance.now(),
  frame: (run) => void requestAnimationFrame(run),
};

export class DrawQueue {
  private readonly jobs = new Map<object, () => void>();
  private scheduled = false;

  constructor(
    private readonly scheduler: Scheduler = browser,
    private readonly budgetMs: number = FRAME_BUDGET_MS,
  ) {}

  /** Run `draw` for `owner` at a coming frame (replacing one of its not run yet); returns a cancel. */
  add(owner: object, draw: () => void): () => void {
    this.jobs.set(owner, draw);
    if (!this.scheduled) {
      this.scheduled = true;
      this.scheduler.frame(this.run);
    }
    return () => {
      if (this.jobs.get(owner) === draw) this.jobs.delete(owner);
    };
  }

  get size(): number {
    return this.jobs.size;
  }

  private readonly run = (): void => {
    this.scheduled = false;
    const start = this.scheduler.now();
    for (const [owner, draw] of this.jobs) {
      this.jobs.delete(owner);
      draw();
      if (this.scheduler.now() - start >= this.budgetMs) break;
    }
    if (this.jobs.size > 0) {
      this.scheduled = true;
      this.scheduler.frame(this.run);
    }
  };
}

/** The compare page's charts' queue. */
export const chartDraws = new DrawQueue();
