import { useEffect, useRef, useState } from "react";
import { Link, useParams } from "react-router";

import { useNextBattle, useVote } from "../../api/hooks";
import type { Battle, RevealSide, VoteChoice, VoteResult } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";

const CHOICES: { choice: VoteChoice; label: string; key: string }[] = [
  { choice: "a", label: "A is better", key: "1" },
  { choice: "b", label: "B is better", key: "2" },
  { choice: "tie", label: "Tie", key: "3" },
  { choice: "both_bad", label: "Both bad", key: "4" },
];

const CHOICE_BY_KEY: Record<string, VoteChoice> = {
  "1": "a",
  "2": "b",
  "3": "tie",
  "4": "both_bad",
  ArrowLeft: "a",
  ArrowRight: "b",
};

/** Keys typed into a field are text, never shortcuts. */
function isTyping(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  return target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName);
}

/**
 * One blind battle at a time. Nothing here may name a candidate before the vote: the battle
 * carries none, and the page shows the reveal only from the vote's answer.
 */
export function VotePage() {
  const evalId = Number(useParams().id);
  const next = useNextBattle(evalId);
  const vote = useVote(evalId);
  const [choice, setChoice] = useState<VoteChoice | null>(null);
  const [comment, setComment] = useState("");

  const fetchNext = () => {
    setChoice(null);
    setComment("");
    vote.reset();
    next.mutate();
  };

  // One battle on arrival (a ref, so StrictMode's second effect run asks for no other).
  const asked = useRef(false);
  useEffect(() => {
    if (asked.current) return;
    asked.current = true;
    next.mutate();
  }, []);

  const battle: Battle | undefined = next.data;
  const result: VoteResult | undefined = vote.data;

  const submit = () => {
    if (!battle || !choice || result || vote.isPending) return;
    vote.mutate({ battle: battle.battle, vote: { choice, comment: comment.trim() } });
  };

  // Shortcuts, read each render so that they see the current state.
  const onKey = useRef<(event: KeyboardEvent) => void>(() => undefined);
  onKey.current = (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.key === "Enter") {
      // An Enter in the comment field submits through the form.
      if (isTyping(event.target)) return;
      if (result) {
        event.preventDefault();
        if (!next.isPending) fetchNext();
      } else if (battle && choice) {
        // Also keeps a focused choice button from taking the Enter as a click.
        event.preventDefault();
        submit();
      }
      return;
    }
    if (isTyping(event.target) || !battle || result) return;
    const picked = CHOICE_BY_KEY[event.key];
    if (picked) {
      event.preventDefault();
      setChoice(picked);
    }
  };
  useEffect(() => {
    const listener = (event: KeyboardEvent) => onKey.current(event);
    window.addEventListener("keydown", listener);
    return () => window.removeEventListener("keydown", listener);
  }, []);

  return (
    <section className="vote-page">
      <p className="crumbs">
        <Link to={`/evals/${evalId}`}>Back to the eval</Link>
      </p>
      <div className="page-head">
        <h1>Vote</h1>
        <span className="muted small">
          Keys: 1 A · 2 B · 3 tie · 4 both bad · ←/→ A/B · Enter {result ? "next battle" : "submit"}
        </span>
      </div>

      {next.isError ? <ErrorBox error={next.error} title="Cannot get a battle" /> : null}
      {next.isPending ? <p className="muted">Loading…</p> : null}
      {next.isSuccess && !battle ? (
        <p className="empty-note" data-testid="nothing-left">
          Nothing left for you to vote on in this eval.
        </p>
      ) : null}

      {battle && !next.isPending ? (
        <>
          {battle.guidelines ? (
            <details className="panel guidelines" open data-testid="guidelines">
              <summary>Guidelines</summary>
              <p className="prewrap">{battle.guidelines}</p>
            </details>
          ) : null}
          <div className="panel">
            <h2>Prompt</h2>
            <p className="prewrap" data-testid="prompt">
              {battle.prompt.text}
            </p>
            {battle.prompt.reference ? (
              <>
                <h3>Reference answer</h3>
                <p className="prewrap" data-testid="reference">
                  {battle.prompt.reference}
                </p>
              </>
            ) : null}
          </div>
          <div className="battle-sides">
            <Response side="A" text={battle.a} picked={choice === "a"} reveal={result?.reveal.a} />
            <Response side="B" text={battle.b} picked={choice === "b"} reveal={result?.reveal.b} />
          </div>

          {result ? (
            <div className="vote-done" data-testid="reveal">
              <p>
                Your vote: <strong>{CHOICES.find((c) => c.choice === result.vote.choice)?.label}</strong>. A was{" "}
                <strong data-testid="reveal-a">{result.reveal.a.label}</strong>, B was{" "}
                <strong data-testid="reveal-b">{result.reveal.b.label}</strong>.
              </p>
              <button type="button" className="primary" onClick={fetchNext} disabled={next.isPending}>
                Next battle
              </button>
            </div>
          ) : (
            <form
              className="vote-form"
              onSubmit={(event) => {
                event.preventDefault();
                submit();
              }}
            >
              <div className="choices" role="group" aria-label="Your verdict">
                {CHOICES.map((c) => (
                  <button
                    key={c.choice}
                    type="button"
                    className={choice === c.choice ? "primary" : undefined}
                    aria-pressed={choice === c.choice}
                    onClick={() => setChoice(c.choice)}
                  >
                    {c.label} <kbd>{c.key}</kbd>
                  </button>
                ))}
              </div>
              <label className="comment">
                Comment (optional){" "}
                <input
                  type="text"
                  maxLength={500}
                  value={comment}
                  onChange={(e) => setComment(e.target.value)}
                  placeholder="why, in a few words"
                  data-testid="comment"
                />
              </label>
              <button type="submit" className="primary" disabled={!choice || vote.isPending} data-testid="submit-vote">
                Submit vote
              </button>
            </form>
          )}
          {vote.isError ? <ErrorBox error={vote.error} title="Cannot record the vote" /> : null}
        </>
      ) : null}
    </section>
  );
}

function describeSide(side: RevealSide): string {
  if (side.run === null) return `${side.label} (outside model)`;
  return `${side.label} (run ${side.run}${side.step === null ? "" : `, step ${side.step}`})`;
}

function Response({
  side,
  text,
  picked,
  reveal,
}: {
  side: "A" | "B";
  text: string;
  picked: boolean;
  reveal: RevealSide | undefined;
}) {
  return (
    <article className={picked ? "response picked" : "response"} data-testid={`response-${side.toLowerCase()}`}>
      <h2>{side}</h2>
      {reveal ? <p className="muted small">{describeSide(reveal)}</p> : null}
      <div className="prewrap">{text}</div>
    </article>
  );
}
