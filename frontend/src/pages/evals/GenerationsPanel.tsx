import { useState } from "react";
import { Link, useParams } from "react-router";

import { useEval, useEvalSet, useGenerations } from "../../api/hooks";
import type { Eval, EvalPrompt, Generation } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { StatusBadge } from "../../components/StatusBadge";

/** Prompts shown per page, each with every candidate's responses. */
export const PROMPTS_PER_PAGE = 5;
/** The API's page bound (controlplane.api.Pagination.max_limit). */
const MAX_LIMIT = 500;

/**
 * Generations come ordered by prompt, then candidate, then sample, so a page of
 * `prompts × candidates × samples` holds whole prompts (at most MAX_LIMIT a page).
 */
export function pageSize(evaluation: Pick<Eval, "candidates" | "samples_per_prompt">): number {
  const perPrompt = Math.max(1, evaluation.candidates.length * evaluation.samples_per_prompt);
  const prompts = Math.max(1, Math.min(PROMPTS_PER_PAGE, Math.floor(MAX_LIMIT / perPrompt)));
  return Math.min(MAX_LIMIT, prompts * perPrompt);
}

/** A page of responses grouped by prompt, then by candidate, in the page's order. */
export function groupByPrompt(generations: Generation[]): { prompt: number; byCandidate: Map<string, Generation[]> }[] {
  const groups: { prompt: number; byCandidate: Map<string, Generation[]> }[] = [];
  for (const generation of generations) {
    let group = groups.at(-1);
    if (group?.prompt !== generation.prompt) {
      group = { prompt: generation.prompt, byCandidate: new Map() };
      groups.push(group);
    }
    const list = group.byCandidate.get(generation.candidate) ?? [];
    list.push(generation);
    group.byCandidate.set(generation.candidate, list);
  }
  return groups;
}

/** /evals/:id/responses: the eval's published responses (its header, then the panel). */
export function EvalResponsesPage() {
  const evalId = Number(useParams().id);
  const query = useEval(evalId);
  if (query.isPending) return <p className="muted">Loading…</p>;
  if (query.isError) return <ErrorBox error={query.error} title="Cannot load the eval" />;
  const data = query.data;
  return (
    <section>
      <p className="crumbs">
        <Link to="/evals">Evals</Link> / <Link to={`/evals/${data.id}`}>{data.name}</Link>
      </p>
      <div className="page-head">
        <div className="run-title">
          <h1>{data.name}</h1>
          <StatusBadge status={data.status} />
        </div>
      </div>
      <GenerationsPanel evaluation={data} />
    </section>
  );
}

/**
 * Every response of a CLOSED eval with the candidate that wrote it, per prompt and side by side.
 * While the eval is not closed this shows no response and asks for none: votes are blind until
 * the owner closes the eval, and the API would refuse (409) anyway.
 */
export function GenerationsPanel({ evaluation }: { evaluation: Eval }) {
  const closed = evaluation.status === "CLOSED";
  const limit = pageSize(evaluation);
  const [offset, setOffset] = useState(0);
  const generations = useGenerations(evaluation.id, offset, limit, closed);
  const evalSet = useEvalSet(closed ? evaluation.eval_set : undefined);

  if (!closed) {
    return (
      <section className="panel" data-testid="generations-closed-only">
        <h2>Responses</h2>
        <p className="muted">
          Each candidate's responses are published with its name once the eval is closed; until then they are seen only
          in blind battles.
        </p>
      </section>
    );
  }

  const prompts = new Map<number, EvalPrompt>((evalSet.data?.prompts ?? []).map((p) => [p.id, p]));
  const data = generations.data;
  const total = data?.count ?? 0;
  const groups = groupByPrompt(data?.results ?? []);

  return (
    <section className="panel generations" data-testid="generations">
      <h2>Responses</h2>
      {generations.isError ? <ErrorBox error={generations.error} title="Cannot load the responses" /> : null}
      {generations.isPending ? <p className="muted">Loading…</p> : null}
      {data && total === 0 ? <p className="muted">This eval has no responses.</p> : null}
      {groups.map((group) => {
        const prompt = prompts.get(group.prompt);
        return (
          <article key={group.prompt} className="generation-prompt" data-testid={`generations-prompt-${group.prompt}`}>
            <header>
              <h3>Prompt {prompt ? `#${prompt.position}` : ""}</h3>
              {prompt ? <p className="prewrap">{prompt.text}</p> : null}
              {prompt?.reference ? (
                <p className="prewrap muted small">
                  <strong>Reference:</strong> {prompt.reference}
                </p>
              ) : null}
              {prompt?.tags.map((tag) => (
                <span key={tag} className="tag">
                  {tag}
                </span>
              ))}
            </header>
            <div className="generation-columns">
              {[...group.byCandidate.entries()].map(([label, samples]) => (
                <div key={label} className="response" data-testid={`generation-${group.prompt}-${label}`}>
                  <h4 className="candidate-label">{label}</h4>
                  {samples.map((generation) => (
                    <div key={generation.id} className="generation-sample">
                      {evaluation.samples_per_prompt > 1 ? (
                        <p className="muted small">sample {generation.sample + 1}</p>
                      ) : null}
                      <p className="prewrap">{generation.text}</p>
                      <p className="muted small">
                        {generation.tokens} {generation.tokens === 1 ? "token" : "tokens"}
                      </p>
                    </div>
                  ))}
                </div>
              ))}
            </div>
          </article>
        );
      })}
      {total > limit ? (
        <div className="pager">
          <button type="button" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - limit))}>
            ← Previous
          </button>
          <span className="muted" data-testid="generations-page">
            page {Math.floor(offset / limit) + 1} of {Math.ceil(total / limit)}
          </span>
          <button
            type="button"
            disabled={offset + limit >= total}
            onClick={() => setOffset(offset + limit)}
            data-testid="generations-next"
          >
            Next →
          </button>
        </div>
      ) : null}
    </section>
  );
}
