import { useState } from "react";
import { Link, useNavigate, useSearchParams } from "react-router";

import { useCheckpoints, useRuns } from "../../api/hooks";
import { ErrorBox } from "../../components/ErrorBox";
import { useChats, useCreateChat, type ChatSession } from "./api";

/** Whole positive numbers only: anything else in ?checkpoint= is no checkpoint. */
export function checkpointParam(value: string | null): number | null {
  return value && /^[1-9][0-9]{0,15}$/.test(value) ? Number(value) : null;
}

/**
 * Start a chat with a checkpoint: pick a run and one of its checkpoints (or arrive with
 * ?checkpoint=ID from a run's page), or open one of the team's chats.
 */
export function ChatPage() {
  const [params] = useSearchParams();
  const preset = checkpointParam(params.get("checkpoint"));
  const [runId, setRunId] = useState<number | null>(null);
  const [picked, setPicked] = useState<number | null>(null);
  const checkpoint = preset ?? picked;
  const create = useCreateChat();
  const navigate = useNavigate();
  const chats = useChats(preset);

  const start = () => {
    if (checkpoint === null) return;
    create.mutate({ checkpoint }, { onSuccess: (chat) => void navigate(`/chat/${chat.id}`) });
  };

  return (
    <section className="chat-page">
      <div className="page-head">
        <h1>Chat with a checkpoint</h1>
      </div>
      <div className="panel">
        {preset === null ? <CheckpointPicker runId={runId} onRun={setRunId} picked={picked} onPick={setPicked} /> : (
          <p>
            Checkpoint <strong>#{preset}</strong>. <Link to="/chat">Pick another</Link>
          </p>
        )}
        <p className="muted small">
          The first message loads the model in a chat server on the Ray cluster; it stops when idle.
        </p>
        <button
          type="button"
          className="primary"
          disabled={checkpoint === null || create.isPending}
          onClick={start}
          data-testid="start-chat"
        >
          Start a chat
        </button>
        {create.isError ? <ErrorBox error={create.error} title="Cannot start the chat" /> : null}
      </div>
      <h2>{preset === null ? "Your team's chats" : "Chats with this checkpoint"}</h2>
      {chats.isError ? <ErrorBox error={chats.error} title="Cannot list chats" /> : null}
      {chats.data && chats.data.results.length === 0 ? <p className="muted">No chats yet.</p> : null}
      <ul className="chat-list" data-testid="chat-list">
        {chats.data?.results.map((chat: ChatSession) => (
          <li key={chat.id}>
            <Link to={`/chat/${chat.id}`}>{chat.label}</Link>{" "}
            <span className="muted small">
              by {chat.created_by}, {new Date(chat.created_at).toLocaleString()}
            </span>
          </li>
        ))}
      </ul>
    </section>
  );
}

function CheckpointPicker({
  runId,
  onRun,
  picked,
  onPick,
}: {
  runId: number | null;
  onRun: (id: number | null) => void;
  picked: number | null;
  onPick: (id: number | null) => void;
}) {
  const runs = useRuns({ limit: 100 });
  const checkpoints = useCheckpoints(runId ?? 0);
  const listed = runId !== null ? (checkpoints.data ?? []) : [];
  return (
    <div className="chat-picker">
      <label>
        Run{" "}
        <select
          value={runId ?? ""}
          onChange={(e) => {
            onRun(e.target.value ? Number(e.target.value) : null);
            onPick(null);
          }}
          data-testid="pick-run"
        >
          <option value="">Choose a run…</option>
          {runs.data?.results
            .filter((run) => run.recipe !== "chat" && run.recipe !== "generate")
            .map((run) => (
              <option key={run.id} value={run.id}>
                #{run.id} {run.name}
              </option>
            ))}
        </select>
      </label>{" "}
      <label>
        Checkpoint{" "}
        <select
          value={picked ?? ""}
          disabled={runId === null}
          onChange={(e) => onPick(e.target.value ? Number(e.target.value) : null)}
          data-testid="pick-checkpoint"
        >
          <option value="">{runId !== null && listed.length === 0 ? "No checkpoints" : "Choose a checkpoint…"}</option>
          {listed.map((c) => (
            <option key={c.id} value={c.id}>
              step {c.step}
            </option>
          ))}
        </select>
      </label>
      {runs.isError ? <ErrorBox error={runs.error} title="Cannot list runs" /> : null}
    </div>
  );
}
