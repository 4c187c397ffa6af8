import type { ChatMessage, ChatServer } from "./api";
import { plural } from "../../format";

/** "TTFT 41 ms · 38.2 tokens/s · 12 tokens" for a finished reply. */
export function replyFigures(message: ChatMessage): string {
  const parts: string[] = [];
  if (typeof message.ttft_ms === "number") parts.push(`TTFT ${formatMs(message.ttft_ms)}`);
  if (typeof message.tokens_per_s === "number") parts.push(`${message.tokens_per_s.toFixed(1)} tokens/s`);
  if (typeof message.tokens === "number") parts.push(plural(message.tokens, "token"));
  return parts.join(" · ");
}

export function formatMs(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

/** What a reply that no server took yet waits for, in words; `run` is the server the reply names
 * (known from the send's answer before the chat is read again with the server's state). */
export function waitingFor(server: ChatServer | null | undefined, named: number | null = null): string {
  if (!server) {
    return named === null
      ? "Starting the model: asking for a chat server…"
      : `Starting the model: chat server run #${named}…`;
  }
  const run = `chat server run #${server.run}`;
  if (server.status === "QUEUED" || server.status === "DISPATCHING") {
    const why = server.waiting_for ? ` (${server.waiting_for})` : "";
    return `Starting the model: waiting for Ray to start the ${run}${why}…`;
  }
  if (server.status === "RUNNING") {
    return `Starting the model: the ${run} is loading it, or answering earlier messages first…`;
  }
  return `Waiting for a new chat server: the ${run} ended (${server.status})…`;
}
