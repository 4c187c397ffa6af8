import { describe, expect, it } from "vitest";

import { ApiError, buildQuery, errorFromResponse, readCookie } from "./client";

describe("readCookie", () => {
  it("finds a cookie among others", () => {
    expect(readCookie("csrftoken", "sessionid=abc; csrftoken=t0k%3D; x=1")).toBe("t0k=");
    expect(readCookie("missing", "a=1")).toBeNull();
    expect(readCookie("a", "")).toBeNull();
  });
});

describe("buildQuery", () => {
  it("drops empty values and joins arrays with commas", () => {
    expect(buildQuery({ status: "RUNNING", name: "", tag: undefined, limit: 50, offset: 0 })).toBe(
      "?status=RUNNING&limit=50&offset=0",
    );
    expect(buildQuery({ keys: ["reward/mean", "policy/loss"], max_points: 1000 })).toBe(
      "?keys=reward%2Fmean%2Cpolicy%2Floss&max_points=1000",
    );
    expect(buildQuery({})).toBe("");
  });
});

describe("errorFromResponse", () => {
  it("uses the API's message, code and fields", async () => {
    const response = new Response(
      JSON.stringify({ error: "invalid", message: "Config is invalid.", fields: { "config.steps": ["must be >= 1"] } }),
      { status: 400 },
    );
    const error = await errorFromResponse(response);
    expect(error).toBeInstanceOf(ApiError);
    expect(error.status).toBe(400);
    expect(error.code).toBe("invalid");
    expect(error.message).toBe("Config is invalid.");
    expect(error.fields).toEqual({ "config.steps": ["must be >= 1"] });
  });

  it("falls back to the status line for a body that is not JSON", async () => {
    const error = await errorFromResponse(new Response("<html>bad gateway</html>", { status: 502, statusText: "Bad Gateway" }));
    expect(error.message).toBe("502 Bad Gateway");
    expect(error.code).toBe("http_502");
  });

  it("tells a missing session from a forbidden action", () => {
    expect(new ApiError(401, "not_authenticated", "").isUnauthenticated).toBe(true);
    expect(new ApiError(403, "not_authenticated", "").isUnauthenticated).toBe(true);
    expect(new ApiError(403, "permission_denied", "").isUnauthenticated).toBe(false);
  });
});
