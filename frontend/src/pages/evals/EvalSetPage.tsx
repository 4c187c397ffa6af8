import { useState } from "react";
import { Link, useParams } from "react-router";

import { useEvalSet, useImportEvalSet, useTeam } from "../../api/hooks";
import type { EvalSetDetail } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { formatDateTime } from "../../format";
import { JsonlInput } from "./JsonlInput";
import { errorFields, FormError, mayCreate } from "./forms";
import { isLinePath } from "./jsonl";

/** An eval set: its guidelines and every prompt with its reference and tags; members append more. */
export function EvalSetPage() {
  const setId = Number(useParams().id);
  const query = useEvalSet(setId);
  if (query.isPending) return <p className="muted">Loading…</p>;
  if (query.isError) return <ErrorBox error={query.error} title="Cannot load the eval set" />;
  const data = query.data;
  return (
    <section>
      <p className="crumbs">
        <Link to="/evals">Evals</Link> / <Link to="/eval-sets">Eval sets</Link> / {data.team.slug}
      </p>
      <div className="page-head">
        <h1>{data.name}</h1>
        <NewEvalLink set={data} />
      </div>
      <dl className="facts">
        <div>
          <dt>prompts</dt>
          <dd data-testid="prompt-count">{data.prompt_count}</dd>
        </div>
        <div>
          <dt>created by</dt>
          <dd>{data.created_by}</dd>
        </div>
        <div>
          <dt>created</dt>
          <dd>{formatDateTime(data.created_at)}</dd>
        </div>
      </dl>
      {data.description ? <p className="prewrap set-description">{data.description}</p> : null}
      <section className="panel">
        <h2>Guidelines for voters</h2>
        {data.guidelines ? (
          <p className="prewrap" data-testid="guidelines">
            {data.guidelines}
          </p>
        ) : (
          <p className="muted">None: voters judge by their own lights.</p>
        )}
      </section>
      <PromptsTable set={data} />
      <ImportPanel set={data} />
    </section>
  );
}

/** Members and admins start an eval on the set; a viewer is not offered it. */
function NewEvalLink({ set }: { set: EvalSetDetail }) {
  const team = useTeam(set.team.id);
  if (!team.data || !mayCreate(team.data)) return null;
  return (
    <Link to={`/evals/new?eval_set=${set.id}`} className="button-link" data-testid="new-eval-from-set">
      New eval on this set
    </Link>
  );
}

function PromptsTable({ set }: { set: EvalSetDetail }) {
  return (
    <section className="panel">
      <h2>Prompts</h2>
      <table className="table prompts-table" data-testid="prompts-table">
        <thead>
          <tr>
            <th className="num">#</th>
            <th>prompt</th>
            <th>reference</th>
            <th>tags</th>
          </tr>
        </thead>
        <tbody>
          {set.prompts.map((prompt) => (
            <tr key={prompt.id} data-testid={`prompt-${prompt.position}`}>
              <td className="num">{prompt.position}</td>
              <td className="wrap">
                <p className="prewrap">{prompt.text}</p>
              </td>
              <td className="wrap">
                {prompt.reference ? <p className="prewrap">{prompt.reference}</p> : <span className="muted">–</span>}
              </td>
              <td className="wrap">
                {prompt.tags.map((tag) => (
                  <span key={tag} className="tag">
                    {tag}
                  </span>
                ))}
              </td>
            </tr>
          ))}
          {set.prompts.length === 0 ? (
            <tr>
              <td colSpan={4} className="empty">
                No prompts yet: import some below.
              </td>
            </tr>
          ) : null}
        </tbody>
      </table>
    </section>
  );
}

/** Append prompts (members and admins): all the lines, or none when one is bad. */
function ImportPanel({ set }: { set: EvalSetDetail }) {
  const team = useTeam(set.team.id);
  const importing = useImportEvalSet(set.id);
  const [text, setText] = useState("");
  if (team.data && !mayCreate(team.data)) {
    return (
      <p className="muted small" data-testid="cannot-import">
        Only members and admins of {set.team.name} add prompts; you are a viewer.
      </p>
    );
  }
  return (
    <section className="panel">
      <h2>Add prompts</h2>
      <FormError
        error={importing.error}
        title="Nothing was imported"
        placed={(path) => path === "jsonl" || isLinePath(path)}
      />
      {importing.isSuccess ? (
        <p className="muted" data-testid="imported">
          Imported {importing.data.imported} prompts; the set has {importing.data.prompt_count}.
        </p>
      ) : null}
      <form
        className="form"
        onSubmit={(event) => {
          event.preventDefault();
          importing.mutate({ jsonl: text }, { onSuccess: () => setText("") });
        }}
      >
        <JsonlInput value={text} onChange={setText} fields={errorFields(importing.error)} />
        <div className="form-actions">
          <button type="submit" className="primary" disabled={importing.isPending || text.trim() === ""} data-testid="import">
            {importing.isPending ? "Importing…" : "Import"}
          </button>
        </div>
      </form>
    </section>
  );
}
