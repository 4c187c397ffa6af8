import { afterEach, describe, expect, it, vi } from "vitest";

import { ApiError } from "../../api/client";
import { mayRetry, newIdempotencyKey, postSweep, sweepAttempt, type SweepSubmitBody } from "./api";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const BODY: SweepSubmitBody = {
  project: "lab/e2e",
  name: "pace",
  recipe: "smoke",
  config: { steps: 1 },
  tags: [],
  grid: { tasks_per_step: [1, 2] },
  seeds: 3,
};

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("newIdempotencyKey", () => {
  it("uses randomUUID where the browser has it", () => {
    expect(newIdempotencyKey({ randomUUID: () => "from-randomUUID", getRandomValues: (a) => a })).toBe("from-randomUUID");
    expect(newIdempotencyKey()).toMatch(UUID);
  });

  it("makes a version-4 UUID from random bytes where it has not (plain http)", () => {
    const key = newIdempotencyKey({ getRandomValues: <T extends ArrayBufferView>(array: T) => {
      new Uint8Array(array.buffer).fill(0xff);
      return array;
    } });
    expect(key).toBe("ffffffff-ffff-4fff-bfff-ffffffffffff");
    const zeros = newIdempotencyKey({ getRandomValues: <T extends ArrayBufferView>(array: T) => array });
    expect(zeros).toBe("00000000-0000-4000-8000-000000000000");
    expect(zeros).toMatch(UUID);
  });
});

describe("sweepAttempt", () => {
  it("keeps the key while the body is the same, and makes one for another body", () => {
    let made = 0;
    const make = () => `key-${++made}`;
    const first = sweepAttempt(null, "A", make);
    expect(first).toEqual({ key: "key-1", body: "A" });
    expect(sweepAttempt(first, "A", make)).toBe(first);
    expect(sweepAttempt(first, "B", make)).toEqual({ key: "key-2", body: "B" });
  });

  it("calls a retry only what may have reached the server", () => {
    expect(mayRetry(new ApiError(0, "network_error", ""))).toBe(true);
    expect(mayRetry(new ApiError(502, "http_502", ""))).toBe(true);
    expect(mayRetry(new ApiError(400, "validation_error", ""))).toBe(false);
    expect(mayRetry(new Error("x"))).toBe(false);
  });
});

describe("postSweep", () => {
  it("sends the key and the CSRF token, and tells a made sweep from a replayed one", async () => {
    const calls: [string, RequestInit | undefined][] = [];
    let status = 201;
    vi.stubGlobal("document", { cookie: "csrftoken=t0k" });
    vi.stubGlobal(
      "fetch",
      vi.fn(async (url: string, init?: RequestInit) => {
        calls.push([url, init]);
        return new Response(JSON.stringify({ id: 9 }), { status });
      }),
    );
    expect(await postSweep(BODY, "k-1")).toMatchObject({ group: { id: 9 }, created: true });
    status = 200;
    expect(await postSweep(BODY, "k-1")).toMatchObject({ group: { id: 9 }, created: false });
    const [url, init] = calls[0] ?? ["", undefined];
    expect(url).toBe("/api/v1/sweeps");
    expect(init?.method).toBe("POST");
    expect(init?.headers).toMatchObject({ "Idempotency-Key": "k-1", "X-CSRFToken": "t0k", "Content-Type": "application/json" });
    expect(JSON.parse(String(init?.body))).toEqual(BODY);
  });

  it("turns a failed connection into a network error, and an error answer into its ApiError", async () => {
    vi.stubGlobal("document", { cookie: "csrftoken=t0k" });
    vi.stubGlobal("fetch", vi.fn(async () => Promise.reject(new TypeError("Failed to fetch"))));
    await expect(postSweep(BODY, "k")).rejects.toMatchObject({ status: 0, code: "network_error" });
    vi.stubGlobal(
      "fetch",
      vi.fn(async () => new Response(JSON.stringify({ error: "conflict", message: "used for a different sweep" }), { status: 409 })),
    );
    await expect(postSweep(BODY, "k")).rejects.toMatchObject({ status: 409, code: "conflict", message: "used for a different sweep" });
  });
});
