import { useState, type FormEvent } from "react";
import { Link, useParams } from "react-router";

import { ErrorBox } from "../../components/ErrorBox";
import { useChat, useSendMessage, type ChatMessage, type ChatServer } from "./api";
import { replyFigures, waitingFor } from "./format";
import { useChatLive } from "./useChatLive";

/** One chat: the conversation, each reply streaming in over the websocket, and the composer. */
export function ChatSessionPage() {
  const chatId = Number(useParams().id);
  const chat = useChat(chatId);
  const live = useChatLive(chatId);
  const send = useSendMessage(chatId);
  const [text, setText] = useState("");

  if (chat.isPending) return <p className="muted">Loading…</p>;
  if (chat.isError) return <ErrorBox error={chat.error} title="Cannot load the chat" />;
  const data = chat.data;
  const busy = data.messages.some((m) => m.status === "PENDING" || m.status === "STREAMING");

  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (!text.trim()) return;
    send.mutate(text, { onSuccess: () => setText("") });
  };

  return (
    <section className="chat-session">
      <p className="crumbs">
        <Link to="/chat">Chats</Link>
      </p>
      <div className="page-head">
        <h1 data-testid="chat-label">{data.label}</h1>
        <span className="muted small">
          {data.run !== null ? (
            <>
              <Link to={`/runs/${data.run}`}>run #{data.run}</Link>, step {data.step}
            </>
          ) : (
            <code>{data.uri}</code>
          )}
          {live === "up" ? null : <span data-testid="live-state"> · live feed {live}</span>}
        </span>
      </div>
      <ol className="chat-messages" data-testid="messages">
        {data.messages.map((message) => (
          <MessageView key={message.id} message={message} server={data.server} />
        ))}
      </ol>
      <form className="chat-composer" onSubmit={submit}>
        <textarea
          value={text}
          onChange={(e) => setText(e.target.value)}
          placeholder="Your message"
          rows={3}
          maxLength={8000}
          data-testid="composer"
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey) submit(e);
          }}
        />
        <button type="submit" className="primary" disabled={send.isPending || !text.trim()} data-testid="send">
          Send
        </button>
        {busy ? <span className="muted small"> a reply is on its way</span> : null}
      </form>
      {send.isError ? <ErrorBox error={send.error} title="Not sent" /> : null}
    </section>
  );
}

function MessageView({ message, server }: { message: ChatMessage; server: ChatServer | null }) {
  const who = message.role === "user" ? (message.author ?? "someone") : "model";
  return (
    <li className={`chat-message ${message.role}`} data-testid={`message-${message.id}`}>
      <div className="muted small">{who}</div>
      {message.status === "PENDING" ? (
        <p className="muted" data-testid="starting">
          {waitingFor(server, message.server_run)}
        </p>
      ) : null}
      {message.text || message.status === "STREAMING" ? (
        <div className="prewrap" data-testid="text">
          {message.text}
          {message.status === "STREAMING" ? <span className="cursor">▍</span> : null}
        </div>
      ) : null}
      {message.status === "DONE" && message.role === "assistant" ? (
        <div className="muted small" data-testid="figures">
          {replyFigures(message)}
        </div>
      ) : null}
      {message.status === "FAILED" ? (
        <div className="error-box" role="alert" data-testid="failed">
          No reply: {message.failure_reason}
        </div>
      ) : null}
    </li>
  );
}
