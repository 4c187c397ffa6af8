import { cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { WsMessage } from "../../api/types";
import { errorResponse, jsonResponse, stubApi } from "../../test/api";
import { renderPage } from "../../test/render";
import { FakeWebSocket } from "../../test/websocket";
import type { ChatDetail, ChatEvent, ChatMessage } from "./api";
import { applyChatEvent, keepStreamedText } from "./api";
import { ChatPage, checkpointParam } from "./ChatPage";
import { ChatSessionPage } from "./ChatSessionPage";
import { replyFigures, waitingFor } from "./format";

function message(overrides: Partial<ChatMessage> = {}): ChatMessage {
  return {
    id: 1,
    role: "user",
    text: "1+2=",
    status: "DONE",
    failure_reason: "",
    author: "alice",
    server_run: null,
    tokens: null,
    ttft_ms: null,
    tokens_per_s: null,
    created_at: "2026-12-02T10:00:00Z",
    started_at: null,
    finished_at: null,
    ...overrides,
  };
}

function chat(overrides: Partial<ChatDetail> = {}): ChatDetail {
  return {
    id: 3,
    project: {
      id: 1,
      name: "arith",
      description: "",
      team: { id: 1, slug: "lab", name: "Lab" },
      created_at: "2026-11-30T09:00:00Z",
    },
    label: "grpo-arith @ 60",
    checkpoint: 7,
    run: 5,
    step: 60,
    uri: "/ckpt/60",
    created_by: "alice",
    created_at: "2026-12-02T10:00:00Z",
    messages: [
      message(),
      message({ id: 2, role: "assistant", text: "", status: "PENDING", author: null, server_run: 9 }),
    ],
    server: { run: 9, status: "QUEUED", waiting_for: "" },
    ...overrides,
  };
}

/** The server's side of the chat's socket (its events are not run messages). */
function push(socket: FakeWebSocket, event: ChatEvent): void {
  socket.send(event as unknown as WsMessage);
}

function renderChat() {
  return renderPage(<ChatSessionPage />, { path: "/chat/3", route: "/chat/:id" });
}

beforeEach(() => {
  FakeWebSocket.opened = [];
  vi.stubGlobal("WebSocket", FakeWebSocket);
});

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("a chat", () => {
  it("says what a cold reply waits for, then streams it in token by token with its figures", async () => {
    stubApi({ "GET /api/v1/chats/3": () => chat() });
    renderChat();
    const reply = await screen.findByTestId("message-2");
    expect(within(reply).getByTestId("starting").textContent).toContain(
      "waiting for Ray to start the chat server run #9",
    );
    const socket = FakeWebSocket.latest();
    expect(socket.url).toMatch(/\/ws\/chats\/3\/$/);
    socket.accept();
    push(socket, { type: "chat.token", message: 2, text: "3" });
    await waitFor(() => expect(within(reply).getByTestId("text").textContent).toBe("3▍"));
    expect(within(reply).queryByTestId("starting")).toBeNull();
    push(socket, { type: "chat.token", message: 2, text: " ok" });
    await waitFor(() => expect(within(reply).getByTestId("text").textContent).toBe("3 ok▍"));
    push(socket, { type: "chat.done", message: 2, text: "3 ok", tokens: 4, ttft_ms: 41.2, tokens_per_s: 38.25 });
    await waitFor(() => expect(within(reply).getByTestId("text").textContent).toBe("3 ok"));
    expect(within(reply).getByTestId("figures").textContent).toBe("TTFT 41 ms · 38.3 tokens/s · 4 tokens");
    // A late token of a finished reply changes nothing.
    push(socket, { type: "chat.token", message: 2, text: "!" });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(within(reply).getByTestId("text").textContent).toBe("3 ok");
  });

  it("shows why a reply failed", async () => {
    stubApi({ "GET /api/v1/chats/3": () => chat() });
    renderChat();
    await screen.findByTestId("message-2");
    const socket = FakeWebSocket.latest();
    socket.accept();
    push(socket, { type: "chat.failed", message: 2, reason: "The chat server run 9 ended FAILED: OOM" });
    expect((await screen.findByTestId("failed")).textContent).toContain("OOM");
  });

  it("sends a message and shows it with its pending reply at once", async () => {
    let sent: unknown = null;
    const asked = message({ id: 11, text: "hello" });
    const reply = message({ id: 12, role: "assistant", text: "", status: "PENDING", author: null, server_run: 9 });
    stubApi({
      // Read again after the send, the chat has both messages and names the server it started.
      "GET /api/v1/chats/3": () =>
        sent ? chat({ messages: [asked, reply] }) : chat({ messages: [], server: null }),
      "POST /api/v1/chats/3/messages": () => jsonResponse({ message: asked, reply }, 201),
    });
    const fetcher = globalThis.fetch;
    vi.stubGlobal(
      "fetch",
      vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
        if (init?.method === "POST") sent = JSON.parse(String(init.body));
        return fetcher(input, init);
      }),
    );
    document.cookie = "csrftoken=t";
    renderChat();
    const composer = await screen.findByTestId("composer");
    fireEvent.change(composer, { target: { value: "hello" } });
    fireEvent.click(screen.getByTestId("send"));
    await screen.findByTestId("message-12");
    expect(sent).toEqual({ text: "hello" });
    expect(screen.getByTestId("message-11").textContent).toContain("hello");
    await waitFor(() => expect((composer as HTMLTextAreaElement).value).toBe(""));
  });

  it("shows a viewer the server's refusal", async () => {
    stubApi({
      "GET /api/v1/chats/3": () => chat({ messages: [], server: null }),
      "POST /api/v1/chats/3/messages": () =>
        errorResponse(403, "permission_denied", "Viewers read chats but cannot send messages."),
    });
    document.cookie = "csrftoken=t";
    renderChat();
    fireEvent.change(await screen.findByTestId("composer"), { target: { value: "hi" } });
    fireEvent.click(screen.getByTestId("send"));
    expect((await screen.findByRole("alert")).textContent).toContain("Viewers read chats");
  });
});

describe("starting a chat", () => {
  it("from a link with ?checkpoint= posts that checkpoint", async () => {
    let body: unknown = null;
    stubApi({
      "GET /api/v1/chats": () => ({ count: 0, next: null, previous: null, results: [] }),
      "POST /api/v1/chats": async () => jsonResponse(chat(), 201),
    });
    const fetcher = globalThis.fetch;
    vi.stubGlobal(
      "fetch",
      vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
        if (init?.method === "POST") body = JSON.parse(String(init.body));
        return fetcher(input, init);
      }),
    );
    document.cookie = "csrftoken=t";
    renderPage(<ChatPage />, { path: "/chat?checkpoint=7", route: "/chat" });
    expect(await screen.findByText(/No chats yet/)).toBeTruthy();
    fireEvent.click(screen.getByTestId("start-chat"));
    await waitFor(() => expect(body).toEqual({ checkpoint: 7 }));
  });

  it("reads only a positive whole number as a checkpoint", () => {
    expect(checkpointParam("7")).toBe(7);
    expect([checkpointParam("0"), checkpointParam("-1"), checkpointParam("x"), checkpointParam(null)]).toEqual([
      null,
      null,
      null,
      null,
    ]);
  });
});

describe("chat helpers", () => {
  it("word what a reply waits for by its server's state", () => {
    expect(waitingFor(null)).toContain("asking for a chat server");
    expect(waitingFor(null, 4)).toBe("Starting the model: chat server run #4…");
    expect(waitingFor({ run: 4, status: "DISPATCHING", waiting_for: "1 CPU" })).toContain("(1 CPU)");
    expect(waitingFor({ run: 4, status: "RUNNING", waiting_for: "" })).toContain("loading it");
    expect(replyFigures(message({ ttft_ms: 1500, tokens_per_s: 2, tokens: 1 }))).toBe(
      "TTFT 1.50 s · 2.0 tokens/s · 1 token",
    );
  });

  it("keep streamed text when a read comes back while the reply streams", () => {
    const streaming = applyChatEvent(chat(), { type: "chat.token", message: 2, text: "par" });
    const streamed = message({ id: 2, role: "assistant", text: "", status: "STREAMING" });
    const kept = keepStreamedText(streaming, chat({ messages: [message(), streamed] }));
    expect(kept.messages[1]?.text).toBe("par");
    const finished = message({ id: 2, role: "assistant", text: "part", status: "DONE" });
    const done = keepStreamedText(streaming, chat({ messages: [message(), finished] }));
    expect(done.messages[1]?.text).toBe("part");
  });
});
