/**
 * The chat page's API: wire types, query keys, one hook per operation, and the websocket
 * events that patch the chat's cached detail. Kept beside the page rather than in api/hooks.ts
 * and api/types.ts: nothing else uses them, and the shared files stay small to merge.
 */
import { useMutation, useQuery, useQueryClient, type QueryClient } from "@tanstack/react-query";

import { apiRequest } from "../../api/client";
import type { components } from "../../api/schema.gen";

type Schemas = components["schemas"];

export type ChatSession = Schemas["ChatSession"];
export type ChatDetail = Schemas["ChatSessionDetail"];
export type ChatMessage = Schemas["ChatMessage"];
export type ChatServer = Schemas["ChatServer"];
export type ChatSent = Schemas["ChatSent"];
export type ChatPage = Schemas["PaginatedChatSessionList"];
export type ChatCreate = Schemas["ChatCreateRequest"];

/** ws/chats/{id}/: a reply's next text, then the reply done or failed. */
export interface ChatToken {
  type: "chat.token";
  message: number;
  text: string;
}
export interface ChatDone {
  type: "chat.done";
  message: number;
  text: string;
  tokens: number;
  ttft_ms: number;
  tokens_per_s: number;
}
export interface ChatFailed {
  type: "chat.failed";
  message: number;
  reason: string;
}
export type ChatEvent = ChatToken | ChatDone | ChatFailed;

export const chatKeys = {
  lists: ["chats"] as const,
  list: (checkpoint: number | null) => ["chats", checkpoint] as const,
  detail: (chatId: number) => ["chat", chatId] as const,
};

/** While a reply waits for its server, the chat is read again this often: the server's state
 * (queued on Ray, loading the model) changes with no event on the chat's socket. */
export const CHAT_WAITING_REFETCH_MS = 2000;

export function useChats(checkpoint: number | null) {
  return useQuery({
    queryKey: chatKeys.list(checkpoint),
    queryFn: ({ signal }) =>
      apiRequest<ChatPage>("/chats", { query: { limit: 50, checkpoint: checkpoint ?? undefined }, signal }),
  });
}

export function waiting(chat: ChatDetail | undefined): boolean {
  return Boolean(chat?.messages.some((m) => m.status === "PENDING"));
}

export function useChat(chatId: number) {
  return useQuery({
    queryKey: chatKeys.detail(chatId),
    queryFn: ({ signal }) => apiRequest<ChatDetail>(`/chats/${chatId}`, { signal }),
    refetchInterval: (query) => (waiting(query.state.data) ? CHAT_WAITING_REFETCH_MS : false),
    // The server stores a reply's text only when it is done: a read while it streams must not
    // blank what the socket has shown.
    structuralSharing: (old, fresh) => keepStreamedText(old as ChatDetail | undefined, fresh as ChatDetail),
  });
}

export function useCreateChat() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: ChatCreate) => apiRequest<ChatDetail>("/chats", { method: "POST", body }),
    onSuccess: (chat) => {
      queryClient.setQueryData(chatKeys.detail(chat.id), chat);
      void queryClient.invalidateQueries({ queryKey: chatKeys.lists });
    },
  });
}

export function useSendMessage(chatId: number) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (text: string) =>
      apiRequest<ChatSent>(`/chats/${chatId}/messages`, { method: "POST", body: { text } }),
    onSuccess: (sent) => {
      queryClient.setQueryData<ChatDetail>(chatKeys.detail(chatId), (chat) =>
        chat ? { ...chat, messages: mergeMessages(chat.messages, [sent.message, sent.reply]) } : chat,
      );
      // The server it started (or found) is named by the next read.
      void queryClient.invalidateQueries({ queryKey: chatKeys.detail(chatId) });
    },
  });
}

export function keepStreamedText(old: ChatDetail | undefined, fresh: ChatDetail): ChatDetail {
  if (!old) return fresh;
  const streamed = new Map(old.messages.filter((m) => m.status === "STREAMING").map((m) => [m.id, m.text]));
  if (streamed.size === 0) return fresh;
  const messages = fresh.messages.map((m) => {
    const text = streamed.get(m.id);
    return (m.status === "STREAMING" || m.status === "PENDING") && text && text.length > m.text.length
      ? { ...m, status: "STREAMING" as const, text }
      : m;
  });
  return { ...fresh, messages };
}

/** `messages` with `added` put in (by id: an event may have come before the answer). */
export function mergeMessages(messages: ChatMessage[], added: ChatMessage[]): ChatMessage[] {
  const byId = new Map(messages.map((m) => [m.id, m]));
  for (const message of added) if (!byId.has(message.id)) byId.set(message.id, message);
  return [...byId.values()].sort((a, b) => a.id - b.id);
}

/** One event applied to one message; unknown messages and late tokens change nothing. */
export function applyChatEvent(chat: ChatDetail, event: ChatEvent): ChatDetail {
  const messages = chat.messages.map((message) => {
    if (message.id !== event.message) return message;
    if (event.type === "chat.token") {
      if (message.status === "DONE" || message.status === "FAILED") return message;
      return { ...message, status: "STREAMING" as const, text: message.text + event.text };
    }
    if (event.type === "chat.done") {
      return {
        ...message,
        status: "DONE" as const,
        text: event.text,
        tokens: event.tokens,
        ttft_ms: event.ttft_ms,
        tokens_per_s: event.tokens_per_s,
      };
    }
    return { ...message, status: "FAILED" as const, failure_reason: event.reason };
  });
  return { ...chat, messages };
}

export function parseChatEvent(data: unknown): ChatEvent | null {
  if (typeof data !== "string") return null;
  try {
    const value: unknown = JSON.parse(data);
    if (typeof value !== "object" || value === null) return null;
    const type = (value as { type?: unknown }).type;
    return type === "chat.token" || type === "chat.done" || type === "chat.failed" ? (value as ChatEvent) : null;
  } catch {
    return null;
  }
}

export function patchChat(queryClient: QueryClient, chatId: number, event: ChatEvent): void {
  queryClient.setQueryData<ChatDetail>(chatKeys.detail(chatId), (chat) => (chat ? applyChatEvent(chat, event) : chat));
}

export function chatSocketUrl(chatId: number, location: Pick<Location, "protocol" | "host">): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/ws/chats/${chatId}/`;
}
