import { cleanup, fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { battle, errorResponse, stubApi, voteResult } from "../../test/api";
import { renderPage } from "../../test/render";
import { VotePage } from "./VotePage";

const NEXT = "POST /api/v1/evals/3/battles/next";
const VOTE = `POST /api/v1/battles/${battle().battle}/votes`;

function renderVote() {
  return renderPage(<VotePage />, { path: "/evals/3/vote", route: "/evals/:id/vote" });
}

function key(name: string, target: Element | Window = window) {
  fireEvent.keyDown(target, { key: name });
}

beforeEach(() => {
  // Unsafe calls would otherwise first prime the CSRF cookie with a GET /session.
  document.cookie = "csrftoken=test-token";
});

afterEach(() => {
  cleanup();
  document.cookie = "csrftoken=; expires=Thu, 01 Jan 1970 00:00:00 GMT";
  vi.unstubAllGlobals();
});

describe("the vote page", () => {
  it("shows a battle with no candidate's label anywhere before the vote", async () => {
    stubApi({ [NEXT]: () => battle() });
    renderVote();
    expect((await screen.findByTestId("response-a")).textContent).toContain("17 + 25 = 42.");
    expect(screen.getByTestId("response-b").textContent).toContain("It is 43.");
    expect(screen.getByTestId("prompt").textContent).toBe("What is 17 + 25?");
    expect(screen.getByTestId("reference").textContent).toBe("42");
    expect(screen.getByTestId("guidelines").textContent).toContain("Prefer the correct answer");
    const text = document.body.textContent ?? "";
    const html = document.body.innerHTML;
    for (const side of [voteResult().reveal.a, voteResult().reveal.b]) {
      expect(text).not.toContain(side.label);
      expect(html).not.toContain(side.label);
    }
    expect(text).not.toContain("step-");
    expect(screen.queryByTestId("reveal")).toBeNull();
  });

  it("leaves the reference out when the eval set has none", async () => {
    stubApi({ [NEXT]: () => battle({ prompt: { text: "Say hi.", reference: "" } }) });
    renderVote();
    await screen.findByTestId("response-a");
    expect(screen.queryByTestId("reference")).toBeNull();
  });

  it("posts the choice of shortcut 1 on Enter, then reveals who wrote each side", async () => {
    const bodies: unknown[] = [];
    const api = stubApi({
      [NEXT]: () => battle(),
      [VOTE]: () => new Response(JSON.stringify(voteResult("a")), { status: 201, headers: { "Content-Type": "application/json" } }),
    });
    const fetchMock = vi.mocked(fetch);
    renderVote();
    await screen.findByTestId("response-a");
    key("1");
    expect(screen.getByRole("button", { name: /A is better/ }).getAttribute("aria-pressed")).toBe("true");
    key("Enter");
    const reveal = await screen.findByTestId("reveal");
    for (const [input, init] of fetchMock.mock.calls) {
      if (String(input).endsWith("/votes")) bodies.push(JSON.parse(String(init?.body)));
    }
    expect(bodies).toEqual([{ choice: "a", comment: "" }]);
    expect(api.callsTo(`/api/v1/battles/${battle().battle}/votes`)).toBe(1);
    expect(screen.getByTestId("reveal-a").textContent).toBe("grpo-arith@step-60");
    expect(screen.getByTestId("reveal-b").textContent).toBe("grpo-arith@step-20");
    expect(reveal.textContent).toContain("A is better");
    expect(screen.getByTestId("response-a").textContent).toContain("run 5, step 60");

    // Enter again asks for the next battle.
    key("Enter");
    await waitFor(() => expect(api.callsTo("/api/v1/evals/3/battles/next")).toBe(2));
  });

  it("picks B with the right arrow and sends the comment", async () => {
    stubApi({ [NEXT]: () => battle(), [VOTE]: () => voteResult("b") });
    const fetchMock = vi.mocked(fetch);
    renderVote();
    await screen.findByTestId("response-a");
    key("ArrowRight");
    fireEvent.change(screen.getByTestId("comment"), { target: { value: "  A is off by one " } });
    fireEvent.click(screen.getByTestId("submit-vote"));
    await screen.findByTestId("reveal");
    const call = fetchMock.mock.calls.find(([input]) => String(input).endsWith("/votes"));
    expect(JSON.parse(String(call?.[1]?.body))).toEqual({ choice: "b", comment: "A is off by one" });
  });

  it("takes keys typed in the comment as text, not as shortcuts", async () => {
    const api = stubApi({ [NEXT]: () => battle(), [VOTE]: () => voteResult("a") });
    renderVote();
    await screen.findByTestId("response-a");
    const comment = screen.getByTestId("comment");
    key("1", comment);
    key("ArrowLeft", comment);
    fireEvent.change(comment, { target: { value: "1" } });
    expect(screen.getByRole("button", { name: /A is better/ }).getAttribute("aria-pressed")).toBe("false");
    expect((screen.getByTestId("submit-vote") as HTMLButtonElement).disabled).toBe(true);
    key("Enter");
    expect(api.callsTo(`/api/v1/battles/${battle().battle}/votes`)).toBe(0);
  });

  it("says so when nothing is left to vote on (204)", async () => {
    stubApi({ [NEXT]: () => new Response(null, { status: 204 }) });
    renderVote();
    expect((await screen.findByTestId("nothing-left")).textContent).toBe(
      "Nothing left for you to vote on in this eval.",
    );
  });

  it("shows the API's message when the vote is refused (409)", async () => {
    stubApi({
      [NEXT]: () => battle(),
      [VOTE]: () => errorResponse(409, "conflict", "You already voted on this battle."),
    });
    renderVote();
    await screen.findByTestId("response-a");
    key("3");
    key("Enter");
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toBe("Cannot record the vote: You already voted on this battle.");
    expect(screen.queryByTestId("reveal")).toBeNull();
  });

  it("shows the API's message when no battle can be served", async () => {
    stubApi({ [NEXT]: () => errorResponse(409, "conflict", "The eval is not open for votes.") });
    renderVote();
    expect((await screen.findByRole("alert")).textContent).toBe("Cannot get a battle: The eval is not open for votes.");
  });
});
