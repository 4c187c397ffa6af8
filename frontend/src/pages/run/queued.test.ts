import { describe, expect, it } from "vitest";

import { isQueuedForAdmission, queuedParts } from "./queued";

const NOTE = "queued: lab's quota: 1 of 1 CPU in use, this run needs 1 (3rd in lab's queue)";

describe("a run queued for admission", () => {
  it("is told apart from work Ray holds back", () => {
    expect(isQueuedForAdmission({ status: "QUEUED", waiting_for: NOTE, queue: {} })).toBe(true);
    expect(isQueuedForAdmission({ status: "QUEUED", waiting_for: "", queue: { reason: "lab's quota" } })).toBe(true);
    expect(isQueuedForAdmission({ status: "QUEUED", waiting_for: "", queue: {} })).toBe(false);
    const ray = "waiting for cluster resources: 2 tasks need {CPU: 1}";
    expect(isQueuedForAdmission({ status: "RUNNING", waiting_for: ray, queue: {} })).toBe(false);
  });

  it("reads its reason, place and the runs ahead", () => {
    const queue = { reason: "lab's quota: 1 of 1 CPU in use, this run needs 1", position: 3, ahead: [7, 8], ahead_count: 4 };
    expect(queuedParts({ waiting_for: NOTE, queue })).toEqual({
      reason: "lab's quota: 1 of 1 CPU in use, this run needs 1",
      place: "3rd in its team's queue",
      ahead: [7, 8],
      more: 2,
    });
    // Before the first pass, or with only the note: the note without its prefix.
    expect(queuedParts({ waiting_for: NOTE, queue: {} })).toEqual({
      reason: "lab's quota: 1 of 1 CPU in use, this run needs 1 (3rd in lab's queue)",
      place: "",
      ahead: [],
      more: 0,
    });
  });
});
