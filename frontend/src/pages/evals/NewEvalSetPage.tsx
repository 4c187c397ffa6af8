import { useState } from "react";
import { Link, useNavigate } from "react-router";

import { useCreateEvalSet, useTeams } from "../../api/hooks";
import type { Team } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { JsonlInput } from "./JsonlInput";
import { errorFields, FieldError, FormError, mayCreate, whyNotCreate } from "./forms";
import { draftsToJsonl, EMPTY_PROMPT, isLinePath, lineErrors, type PromptDraft } from "./jsonl";

type Source = "typed" | "jsonl";

/** Paths this form shows next to a field; anything else goes in the box on top. */
const PLACED = new Set(["team", "name", "description", "guidelines", "jsonl"]);

export function NewEvalSetPage() {
  const teams = useTeams();
  const create = useCreateEvalSet();
  const navigate = useNavigate();

  const [teamSlug, setTeamSlug] = useState<string | null>(null);
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [guidelines, setGuidelines] = useState("");
  const [source, setSource] = useState<Source>("typed");
  const [drafts, setDrafts] = useState<PromptDraft[]>([{ ...EMPTY_PROMPT }]);
  const [jsonl, setJsonl] = useState("");
  // Rows of the typed prompts behind each line of the last request (blank rows are skipped).
  const [sentRows, setSentRows] = useState<number[]>([]);
  // Line errors are about what was sent: the typed rows or the JSONL text.
  const [sentSource, setSentSource] = useState<Source>("typed");

  const allTeams = teams.data?.results ?? [];
  const team = pickTeam(allTeams, teamSlug);
  const blocked = whyNotCreate(team, "eval sets");
  const fields = errorFields(create.error);
  const typedErrors = sentSource === "typed" ? lineErrors(fields) : new Map<number, Map<string, string[]>>();
  // Under its row, "line 4: prompt: required…" would name a line the person never saw (blank
  // rows are not sent): the problem alone is shown.
  const rowErrors = new Map(
    [...typedErrors.entries()].map(([line, problems]) => [
      sentRows[line - 1],
      new Map([...problems.entries()].map(([field, messages]) => [field, messages.map(withoutLinePrefix)])),
    ]),
  );

  const submit = () => {
    let text = jsonl;
    setSentSource(source);
    if (source === "typed") {
      const made = draftsToJsonl(drafts);
      text = made.jsonl;
      setSentRows(made.rowOfLine);
    }
    if (!team) return;
    create.mutate(
      { team: team.slug, name, description, guidelines, jsonl: text },
      { onSuccess: (created) => void navigate(`/eval-sets/${created.id}`) },
    );
  };

  const setDraft = (row: number, patch: Partial<PromptDraft>) =>
    setDrafts((old) => old.map((draft, i) => (i === row ? { ...draft, ...patch } : draft)));

  if (teams.isPending) return <p className="muted">Loading…</p>;
  if (teams.isError) return <ErrorBox error={teams.error} title="Cannot load your teams" />;

  return (
    <section>
      <p className="crumbs">
        <Link to="/evals">Evals</Link> / <Link to="/eval-sets">Eval sets</Link>
      </p>
      <div className="page-head">
        <h1>New eval set</h1>
      </div>
      {allTeams.length === 0 ? <p className="muted">You are in no team yet: a team admin can add you.</p> : null}
      {blocked ? (
        <p className="notice" data-testid="cannot-create">
          {blocked}
        </p>
      ) : null}
      <form
        className="form"
        onSubmit={(event) => {
          event.preventDefault();
          submit();
        }}
      >
        <FormError
          error={create.error}
          title="The eval set was not created"
          placed={(path) => PLACED.has(path) || isLinePath(path)}
        />
        <label className="field">
          <span>Team</span>
          <select
            value={team?.slug ?? ""}
            onChange={(event) => setTeamSlug(event.target.value)}
            data-testid="set-team"
          >
            {allTeams.map((t) => (
              <option key={t.slug} value={t.slug}>
                {t.name} ({t.role ?? "not a member"})
              </option>
            ))}
          </select>
          <FieldError messages={fields.team} />
        </label>
        <label className="field">
          <span>Name</span>
          <input
            value={name}
            required
            maxLength={200}
            onChange={(event) => setName(event.target.value)}
            aria-invalid={Boolean(fields.name)}
            data-testid="set-name"
          />
          <FieldError messages={fields.name} testId="set-name-error" />
        </label>
        <label className="field">
          <span>Description</span>
          <textarea
            rows={2}
            value={description}
            onChange={(event) => setDescription(event.target.value)}
            data-testid="set-description"
          />
          <FieldError messages={fields.description} />
        </label>
        <label className="field">
          <span>
            Guidelines <span className="muted small">shown to every voter beside each battle</span>
          </span>
          <textarea
            rows={3}
            value={guidelines}
            placeholder="e.g. Prefer the correct answer; when both are correct, the clearer one."
            onChange={(event) => setGuidelines(event.target.value)}
            data-testid="set-guidelines"
          />
          <FieldError messages={fields.guidelines} />
        </label>

        <fieldset className="field prompts-field">
          <legend>Prompts</legend>
          <div className="segmented" role="radiogroup" aria-label="How to give the prompts">
            <label>
              <input
                type="radio"
                name="source"
                checked={source === "typed"}
                onChange={() => setSource("typed")}
                data-testid="source-typed"
              />{" "}
              Type them
            </label>
            <label>
              <input
                type="radio"
                name="source"
                checked={source === "jsonl"}
                onChange={() => setSource("jsonl")}
                data-testid="source-jsonl"
              />{" "}
              JSON Lines (paste or load a file)
            </label>
          </div>
          {source === "typed" ? (
            <PromptRows drafts={drafts} errors={rowErrors} onChange={setDraft} setDrafts={setDrafts} />
          ) : (
            <JsonlInput value={jsonl} onChange={setJsonl} fields={sentSource === "jsonl" ? fields : {}} />
          )}
          {source === "typed" ? <FieldError messages={fields.jsonl} /> : null}
        </fieldset>

        <div className="form-actions">
          <button type="submit" className="primary" disabled={create.isPending || !mayCreate(team)} data-testid="create-set">
            {create.isPending ? "Creating…" : "Create eval set"}
          </button>
          <Link to="/eval-sets">Cancel</Link>
        </div>
      </form>
    </section>
  );
}

/** "line 4: prompt: required, a non-empty string" → "required, a non-empty string". */
function withoutLinePrefix(message: string): string {
  return message.replace(/^line \d+: (?:[\w.]+: )?/, "");
}

/** The chosen team, else the first one the caller may create in, else the first one. */
function pickTeam(teams: Team[], slug: string | null): Team | undefined {
  return teams.find((t) => t.slug === slug) ?? teams.find((t) => mayCreate(t)) ?? teams[0];
}

function PromptRows({
  drafts,
  errors,
  onChange,
  setDrafts,
}: {
  drafts: PromptDraft[];
  errors: Map<number | undefined, Map<string, string[]>>;
  onChange: (row: number, patch: Partial<PromptDraft>) => void;
  setDrafts: (update: (old: PromptDraft[]) => PromptDraft[]) => void;
}) {
  return (
    <div className="prompt-rows">
      {drafts.map((draft, row) => {
        const problems = errors.get(row);
        const other = problems
          ? [...problems.entries()].filter(([field]) => !["prompt", "reference", "tags"].includes(field))
          : [];
        return (
          <div className="prompt-row" key={row} data-testid={`prompt-row-${row + 1}`}>
            <span className="row-number">{row + 1}</span>
            <label className="field">
              <span>Prompt</span>
              <textarea
                rows={2}
                value={draft.prompt}
                onChange={(event) => onChange(row, { prompt: event.target.value })}
                aria-invalid={Boolean(problems?.get("prompt"))}
                data-testid={`prompt-${row + 1}`}
              />
              <FieldError messages={problems?.get("prompt")} testId={`prompt-${row + 1}-error`} />
            </label>
            <label className="field">
              <span>
                Reference <span className="muted small">optional; shown to voters</span>
              </span>
              <textarea
                rows={2}
                value={draft.reference}
                onChange={(event) => onChange(row, { reference: event.target.value })}
                data-testid={`reference-${row + 1}`}
              />
              <FieldError messages={problems?.get("reference")} />
            </label>
            <label className="field tags-field">
              <span>
                Tags <span className="muted small">comma-separated</span>
              </span>
              <input
                value={draft.tags}
                onChange={(event) => onChange(row, { tags: event.target.value })}
                data-testid={`tags-${row + 1}`}
              />
              <FieldError messages={problems?.get("tags")} />
            </label>
            <button
              type="button"
              className="link-button"
              aria-label={`Remove prompt ${row + 1}`}
              disabled={drafts.length === 1}
              onClick={() => setDrafts((old) => old.filter((_, i) => i !== row))}
            >
              Remove
            </button>
            {other.map(([field, messages]) => (
              <FieldError key={field} messages={messages} />
            ))}
          </div>
        );
      })}
      <button
        type="button"
        onClick={() => setDrafts((old) => [...old, { ...EMPTY_PROMPT }])}
        data-testid="add-prompt"
      >
        Add a prompt
      </button>
    </div>
  );
}
