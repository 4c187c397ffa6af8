import { useState } from "react";
import { Link, useNavigate, useSearchParams } from "react-router";

import { useCheckpoints, useCreateEval, useEvalSets, useProjects, useRuns, useTeams } from "../../api/hooks";
import type { EvalSet, ExternalCandidate, RunSummary } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { StatusBadge } from "../../components/StatusBadge";
import { errorFields, FieldError, FormError, mayCreate, whyNotCreate } from "./forms";

/**
 * EvalCreateSerializer's bounds, as the OpenAPI schema publishes them (`minimum`/`maximum`;
 * openapi-typescript does not carry them into schema.gen.ts) and services.MAX_CANDIDATES.
 */
export const EVAL_BOUNDS = {
  samplesPerPrompt: { min: 1, max: 8 },
  minVotersPerPrompt: { min: 1, max: 100 },
  candidates: { min: 2, max: 64 },
} as const;

/** Runs shown per search in the checkpoint picker. */
const RUNS_SHOWN = 20;
const NEW_PROJECT = "__new__";

/** A chosen checkpoint, with what the picker showed about it. */
export interface Chosen {
  id: number;
  run: string;
  step: number;
}

export function NewEvalPage() {
  const [search] = useSearchParams();
  const navigate = useNavigate();
  const sets = useEvalSets();
  const teams = useTeams();
  const create = useCreateEval();

  const [name, setName] = useState("");
  const [setId, setSetId] = useState<number | null>(() => Number(search.get("eval_set")) || null);
  const [projectChoice, setProjectChoice] = useState<string>("");
  const [newProject, setNewProject] = useState("");
  const [chosen, setChosen] = useState<Chosen[]>([]);
  const [external, setExternal] = useState<ExternalCandidate[]>([]);
  // As typed: the inputs' min/max/required stop a bad number before it is sent.
  const [samples, setSamples] = useState("1");
  const [minVoters, setMinVoters] = useState("1");

  const allSets = sets.data?.results ?? [];
  const evalSet = allSets.find((s) => s.id === setId) ?? allSets[0];
  const team = teams.data?.results.find((t) => t.id === evalSet?.team.id);
  const projects = useProjects(evalSet?.team.slug);
  const projectList = projects.data?.results ?? [];
  const project = projectChoice || (projectList[0] ? String(projectList[0].id) : NEW_PROJECT);
  const blocked = whyNotCreate(team, "evals");
  const fields = errorFields(create.error);
  const candidates = chosen.length + external.length;

  if (sets.isPending || teams.isPending) return <p className="muted">Loading…</p>;
  if (sets.isError) return <ErrorBox error={sets.error} title="Cannot load eval sets" />;
  if (teams.isError) return <ErrorBox error={teams.error} title="Cannot load your teams" />;

  const submit = () => {
    if (!evalSet) return;
    const projectRef = project === NEW_PROJECT ? `${evalSet.team.slug}/${newProject.trim()}` : Number(project);
    create.mutate(
      {
        name,
        project: projectRef,
        eval_set: evalSet.id,
        checkpoints: chosen.map((c) => c.id),
        external,
        samples_per_prompt: Number(samples),
        min_voters_per_prompt: Number(minVoters),
      },
      { onSuccess: (created) => void navigate(`/evals/${created.id}`) },
    );
  };

  const placed = (path: string) =>
    ["name", "project", "eval_set", "checkpoints", "external", "samples_per_prompt", "min_voters_per_prompt"].includes(
      path,
    ) ||
    /^checkpoints\[\d+\]$/.test(path) ||
    /^external\[\d+\](\.(uri|label))?$/.test(path);

  return (
    <section>
      <p className="crumbs">
        <Link to="/evals">Evals</Link>
      </p>
      <div className="page-head">
        <h1>New eval</h1>
      </div>
      {allSets.length === 0 ? (
        <p className="notice">
          An eval needs an eval set with prompts: <Link to="/eval-sets/new">create one first</Link>.
        </p>
      ) : null}
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
        <FormError error={create.error} title="The eval was not created" placed={placed} />
        <label className="field">
          <span>Name</span>
          <input
            value={name}
            required
            maxLength={200}
            onChange={(event) => setName(event.target.value)}
            aria-invalid={Boolean(fields.name)}
            data-testid="eval-name"
          />
          <FieldError messages={fields.name} />
        </label>
        <label className="field">
          <span>Eval set</span>
          <select
            value={evalSet?.id ?? ""}
            onChange={(event) => {
              const next = allSets.find((s) => s.id === Number(event.target.value));
              setSetId(Number(event.target.value));
              setProjectChoice("");
              // Checkpoints are a team's: those of another team's runs cannot join this eval.
              if (next?.team.id !== evalSet?.team.id) setChosen([]);
            }}
            data-testid="eval-set"
          >
            {allSets.map((s) => (
              <option key={s.id} value={s.id}>
                {setLabel(s)}
              </option>
            ))}
          </select>
          {evalSet ? (
            <span className="muted small">
              <Link to={`/eval-sets/${evalSet.id}`}>its prompts</Link>
            </span>
          ) : null}
          <FieldError messages={fields.eval_set} testId="eval-set-error" />
        </label>
        <div className="field">
          <label htmlFor="eval-project">Project</label>
          <div className="inline">
            <select
              id="eval-project"
              value={project}
              onChange={(event) => setProjectChoice(event.target.value)}
              data-testid="eval-project"
            >
              {projectList.map((p) => (
                <option key={p.id} value={p.id}>
                  {p.team.slug}/{p.name}
                </option>
              ))}
              <option value={NEW_PROJECT}>a new project…</option>
            </select>
            {project === NEW_PROJECT ? (
              <input
                value={newProject}
                placeholder="project name"
                aria-label="New project name"
                onChange={(event) => setNewProject(event.target.value)}
                data-testid="eval-new-project"
              />
            ) : null}
          </div>
          <FieldError messages={fields.project} />
        </div>

        <fieldset className="field">
          <legend>
            Candidates{" "}
            <span className="muted small" data-testid="candidate-count">
              {candidates} chosen ({EVAL_BOUNDS.candidates.min} to {EVAL_BOUNDS.candidates.max})
            </span>
          </legend>
          <h3>Checkpoints of runs</h3>
          <ChosenList chosen={chosen} fields={fields} onRemove={(id) => setChosen((old) => old.filter((c) => c.id !== id))} />
          <FieldError messages={fields.checkpoints} testId="checkpoints-error" />
          {evalSet ? (
            <RunPicker
              team={evalSet.team.slug}
              chosen={chosen}
              onToggle={(item, on) =>
                setChosen((old) => (on ? [...old.filter((c) => c.id !== item.id), item] : old.filter((c) => c.id !== item.id)))
              }
            />
          ) : null}
          <h3>Models from outside Barrel</h3>
          <ExternalRows rows={external} setRows={setExternal} fields={fields} />
          <FieldError messages={fields.external} testId="external-error" />
        </fieldset>

        <div className="inline">
          <label className="field">
            <span>Samples per prompt</span>
            <input
              type="number"
              min={EVAL_BOUNDS.samplesPerPrompt.min}
              max={EVAL_BOUNDS.samplesPerPrompt.max}
              step={1}
              required
              value={samples}
              onChange={(event) => setSamples(event.target.value)}
              data-testid="eval-samples"
            />
            <span className="muted small">
              {EVAL_BOUNDS.samplesPerPrompt.min} to {EVAL_BOUNDS.samplesPerPrompt.max} responses per candidate and prompt
            </span>
            <FieldError messages={fields.samples_per_prompt} />
          </label>
          <label className="field">
            <span>Min voters per prompt</span>
            <input
              type="number"
              min={EVAL_BOUNDS.minVotersPerPrompt.min}
              max={EVAL_BOUNDS.minVotersPerPrompt.max}
              step={1}
              required
              value={minVoters}
              onChange={(event) => setMinVoters(event.target.value)}
              data-testid="eval-min-voters"
            />
            <span className="muted small">
              {EVAL_BOUNDS.minVotersPerPrompt.min} to {EVAL_BOUNDS.minVotersPerPrompt.max}; then battles go where the
              ranking is least sure
            </span>
            <FieldError messages={fields.min_voters_per_prompt} />
          </label>
        </div>

        <div className="form-actions">
          <button
            type="submit"
            className="primary"
            disabled={create.isPending || !mayCreate(team) || !evalSet}
            data-testid="create-eval"
          >
            {create.isPending ? "Creating…" : "Create eval"}
          </button>
          <Link to="/evals">Cancel</Link>
        </div>
      </form>
    </section>
  );
}

function setLabel(set: EvalSet): string {
  return `${set.team.slug} · ${set.name} (${set.prompt_count} prompts)`;
}

/** The chosen checkpoints; the server names a bad one by its place here (`checkpoints[2]`). */
function ChosenList({
  chosen,
  fields,
  onRemove,
}: {
  chosen: Chosen[];
  fields: Record<string, string[]>;
  onRemove: (id: number) => void;
}) {
  if (chosen.length === 0) return <p className="muted small">None chosen yet: find runs below and tick their checkpoints.</p>;
  return (
    <ul className="chosen" data-testid="chosen">
      {chosen.map((item, index) => (
        <li key={item.id} data-testid={`chosen-${item.id}`}>
          <span className="tag">
            {item.run} @ step {item.step}{" "}
            <button type="button" className="link-button" aria-label={`Remove ${item.run} @ step ${item.step}`} onClick={() => onRemove(item.id)}>
              ×
            </button>
          </span>
          <FieldError messages={fields[`checkpoints[${index}]`]} />
        </li>
      ))}
    </ul>
  );
}

/** Find the team's runs by name; open one to tick its checkpoints, by step. */
function RunPicker({
  team,
  chosen,
  onToggle,
}: {
  team: string;
  chosen: Chosen[];
  onToggle: (item: Chosen, on: boolean) => void;
}) {
  const [name, setName] = useState("");
  const runs = useRuns({ team, name: name.trim() || undefined, limit: RUNS_SHOWN });
  const [open, setOpen] = useState<ReadonlySet<number>>(new Set());
  const results = runs.data?.results ?? [];
  const toggleOpen = (runId: number) =>
    setOpen((old) => {
      const next = new Set(old);
      if (next.has(runId)) next.delete(runId);
      else next.add(runId);
      return next;
    });
  return (
    <div className="run-picker">
      <label>
        Find runs{" "}
        <input
          type="search"
          placeholder="name contains…"
          value={name}
          onChange={(event) => setName(event.target.value)}
          data-testid="run-search"
        />
      </label>
      {runs.isError ? <ErrorBox error={runs.error} title="Cannot load runs" /> : null}
      <ul className="run-list">
        {results.map((run) => (
          <li key={run.id} data-testid={`pick-run-${run.id}`}>
            <button
              type="button"
              className="link-button"
              aria-expanded={open.has(run.id)}
              onClick={() => toggleOpen(run.id)}
              data-testid={`open-run-${run.id}`}
            >
              {open.has(run.id) ? "▾" : "▸"} {run.name}
            </button>{" "}
            <span className="muted small">
              #{run.id} · {run.project.name}
            </span>{" "}
            <StatusBadge status={run.status} />
            {open.has(run.id) ? <RunCheckpoints run={run} chosen={chosen} onToggle={onToggle} /> : null}
          </li>
        ))}
        {runs.data && results.length === 0 ? <li className="muted">No run of {team} matches.</li> : null}
        {runs.data && runs.data.count > results.length ? (
          <li className="muted small">
            {runs.data.count - results.length} more: narrow the search.
          </li>
        ) : null}
      </ul>
    </div>
  );
}

function RunCheckpoints({
  run,
  chosen,
  onToggle,
}: {
  run: RunSummary;
  chosen: Chosen[];
  onToggle: (item: Chosen, on: boolean) => void;
}) {
  const checkpoints = useCheckpoints(run.id);
  if (checkpoints.isPending) return <p className="muted small">Loading checkpoints…</p>;
  if (checkpoints.isError) return <ErrorBox error={checkpoints.error} title="Cannot load checkpoints" />;
  const byStep = [...checkpoints.data].sort((a, b) => a.step - b.step);
  if (byStep.length === 0) return <p className="muted small">This run has no checkpoint.</p>;
  const ids = new Set(chosen.map((c) => c.id));
  const allOn = byStep.every((c) => ids.has(c.id));
  return (
    <div className="checkpoint-picks" data-testid={`checkpoints-of-${run.id}`}>
      {byStep.map((checkpoint) => (
        <label key={checkpoint.id} className="checkpoint-pick" title={checkpoint.uri}>
          <input
            type="checkbox"
            checked={ids.has(checkpoint.id)}
            onChange={(event) => onToggle({ id: checkpoint.id, run: run.name, step: checkpoint.step }, event.target.checked)}
            data-testid={`pick-checkpoint-${checkpoint.id}`}
          />{" "}
          step {checkpoint.step}
        </label>
      ))}
      <button
        type="button"
        className="link-button"
        onClick={() => {
          for (const checkpoint of byStep) onToggle({ id: checkpoint.id, run: run.name, step: checkpoint.step }, !allOn);
        }}
      >
        {allOn ? "none" : "all"}
      </button>
    </div>
  );
}

/** Hugging Face directories another trainer wrote, each with the label voters see after voting. */
function ExternalRows({
  rows,
  setRows,
  fields,
}: {
  rows: ExternalCandidate[];
  setRows: (update: (old: ExternalCandidate[]) => ExternalCandidate[]) => void;
  fields: Record<string, string[]>;
}) {
  const set = (index: number, patch: Partial<ExternalCandidate>) =>
    setRows((old) => old.map((row, i) => (i === index ? { ...row, ...patch } : row)));
  return (
    <div className="external-rows">
      {rows.map((row, index) => (
        <div className="inline external-row" key={index} data-testid={`external-${index}`}>
          <label className="field grow">
            <span>Directory</span>
            <input
              value={row.uri}
              placeholder="/shared/models/my-sft or file:///…"
              onChange={(event) => set(index, { uri: event.target.value })}
              data-testid={`external-uri-${index}`}
            />
            <FieldError messages={fields[`external[${index}].uri`]} />
          </label>
          <label className="field">
            <span>Label</span>
            <input
              value={row.label}
              placeholder="sft-baseline"
              onChange={(event) => set(index, { label: event.target.value })}
              data-testid={`external-label-${index}`}
            />
            <FieldError messages={fields[`external[${index}].label`]} />
          </label>
          <button type="button" className="link-button" onClick={() => setRows((old) => old.filter((_, i) => i !== index))}>
            Remove
          </button>
          <FieldError messages={fields[`external[${index}]`]} />
        </div>
      ))}
      <button type="button" onClick={() => setRows((old) => [...old, { uri: "", label: "" }])} data-testid="add-external">
        Add a model by path
      </button>
    </div>
  );
}
