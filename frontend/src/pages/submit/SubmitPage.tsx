import { useMemo, useRef, useState, type FormEvent } from "react";
import { Link, useNavigate, useSearchParams } from "react-router";

import { ApiError } from "../../api/client";
import { useTeams } from "../../api/hooks";
import { ErrorBox } from "../../components/ErrorBox";
import { plural } from "../../format";
import { FieldError, FormError } from "../evals/forms";
import {
  mayRetry,
  sweepAttempt,
  useAllProjects,
  useCloneRun,
  useRecipes,
  useSourceRun,
  useSubmitRun,
  useSubmitSweep,
  type Recipe,
  type RunDetail,
  type SweepAttempt,
  type SweepSubmitBody,
} from "./api";
import { ConfigForm, fieldId } from "./ConfigForm";
import {
  buildConfig,
  cloneJson,
  collapseSweep,
  describeRunCount,
  diffConfigs,
  draftsFrom,
  fieldStatus,
  flattenSchema,
  getPath,
  isObject,
  jsonDocument,
  MAX_SWEEP_RUNS,
  NAME_MAX,
  parseProject,
  parseSeeds,
  parseTags,
  placeServerErrors,
  readJsonDocument,
  REQUIRED,
  SEED_PATH,
  sweepSize,
  type Built,
  type Draft,
  type Drafts,
  type Json,
  type JsonObject,
  type JsonSchema,
} from "./schemaForm";
import "./submit.css";

/** The inputs above the config whose server errors show beside them. */
const TOP_FIELDS = ["name", "project", "tags", "recipe", "seeds", "grid"] as const;
/** Sections open at first: the config's own fields and the knobs tuned most. The rest open on a
 * click, or by themselves when they hold a change or a problem. */
const COMMON_SECTIONS = new Set(["", "algorithm"]);

/**
 * /runs/new: a run from a recipe, its config form generated from the recipe's schema.
 * /runs/new?from=<id>: a clone of that run, its config edited, the changes listed before sending.
 * Either becomes a sweep with the Sweep toggle: fields take several values, and seeds a count.
 */
export function SubmitPage() {
  const [search] = useSearchParams();
  const from = search.get("from");
  const fromId = from === null ? null : Number(from);
  const validFrom = fromId !== null && Number.isInteger(fromId) && fromId > 0 ? fromId : null;
  const recipes = useRecipes();
  const source = useSourceRun(validFrom);

  const head = (
    <>
      <p className="crumbs">
        <Link to="/">Runs</Link>
        {validFrom !== null ? (
          <>
            {" "}
            / <Link to={`/runs/${validFrom}`}>#{validFrom}</Link>
          </>
        ) : null}
      </p>
      <div className="page-head">
        <h1>{validFrom !== null ? `Clone run #${validFrom}` : "New run"}</h1>
        {source.data ? <span className="muted">{source.data.name}</span> : null}
      </div>
    </>
  );

  if (from !== null && validFrom === null) {
    return (
      <section>
        {head}
        <ErrorBox error={new Error(`"${from}" is not a run id.`)} />
      </section>
    );
  }
  if (recipes.isPending || (validFrom !== null && source.isPending)) {
    return (
      <section>
        {head}
        <p className="muted" data-testid="submit-loading">
          {recipes.isPending ? "Loading recipes…" : `Loading run #${validFrom ?? ""}…`}
        </p>
      </section>
    );
  }
  if (recipes.isError) {
    return (
      <section>
        {head}
        <ErrorBox error={recipes.error} title="Cannot load the recipes" />
        <button type="button" onClick={() => void recipes.refetch()} data-testid="recipes-retry">
          Try again
        </button>
      </section>
    );
  }
  if (source.isError) {
    const notFound = source.error instanceof ApiError && source.error.status === 404;
    return (
      <section>
        {head}
        <ErrorBox error={source.error} title={notFound ? `Run ${validFrom ?? ""} not found` : "Cannot load the run"} />
      </section>
    );
  }
  if (recipes.data.length === 0) {
    return (
      <section>
        {head}
        <p className="notice">This server has no recipes to run.</p>
      </section>
    );
  }
  const run = source.data ?? null;
  if (run && (!recipes.data.some((r) => r.name === run.recipe) || !isObject(run.config))) {
    return (
      <section>
        {head}
        <p className="notice" data-testid="cannot-clone">
          Run #{run.id} was not made from a recipe this server runs (<code>{run.recipe}</code>): it cannot be cloned.
        </p>
      </section>
    );
  }
  return (
    <section className="submit-page">
      {head}
      <SubmitForm key={run?.id ?? "new"} recipes={recipes.data} source={run} initialRecipe={search.get("recipe")} />
    </section>
  );
}

type View = "form" | "json";

function SubmitForm({
  recipes,
  source,
  initialRecipe,
}: {
  recipes: Recipe[];
  source: RunDetail | null;
  initialRecipe: string | null;
}) {
  const navigate = useNavigate();
  const projects = useAllProjects();
  const submitRun = useSubmitRun();
  const cloneRun = useCloneRun(source?.id ?? 0);
  const submitSweep = useSubmitSweep();
  // The sweep's last attempt: sent again unchanged, it goes with the same key.
  const attempt = useRef<SweepAttempt | null>(null);

  const sourceConfig = useMemo<JsonObject>(
    () => (source && isObject(source.config) ? source.config : {}),
    [source],
  );
  const [recipeName, setRecipeName] = useState<string>(
    () =>
      source?.recipe ??
      (initialRecipe && recipes.some((r) => r.name === initialRecipe) ? initialRecipe : (recipes[0]?.name ?? "")),
  );
  const recipe = recipes.find((r) => r.name === recipeName) ?? recipes[0];
  const spec = useMemo(() => flattenSchema((recipe?.config_schema ?? {}) as JsonSchema), [recipe]);

  const [base, setBase] = useState<JsonObject>(() => cloneJson(sourceConfig));
  const [drafts, setDrafts] = useState<Drafts>(() => draftsFrom(spec, sourceConfig));
  const [projectText, setProjectText] = useState<string | null>(null);
  const [name, setName] = useState("");
  const [tagsText, setTagsText] = useState(() => (source ? source.tags.join(", ") : ""));
  const [sweep, setSweep] = useState(false);
  const [seedsText, setSeedsText] = useState("3");
  const [view, setView] = useState<View>("form");
  const [jsonText, setJsonText] = useState("");
  const [jsonNotice, setJsonNotice] = useState<string | null>(null);
  const [attempted, setAttempted] = useState(false);
  const [toggled, setToggled] = useState<Record<string, boolean>>({});
  // The drafts a refused submission had: a field's server error shows until the field is edited.
  const [refusedDrafts, setRefusedDrafts] = useState<Drafts | null>(null);
  // A working directory on its way up: the run waits for its hash.
  const [uploading, setUploading] = useState(false);
  const teams = useTeams();

  const mutation = sweep ? submitSweep : source ? cloneRun : submitRun;
  const projectList = projects.data?.results ?? [];
  const projectValue =
    projectText ?? (projectList[0] ? `${projectList[0].team.slug}/${projectList[0].name}` : "");

  // What would be sent: from the form, or in the JSON view from the JSON as it reads now.
  const formBuilt = useMemo(() => buildConfig(spec, drafts, base, { sweep }), [spec, drafts, base, sweep]);
  const jsonRead = useMemo(
    () => (view === "json" ? readJsonDocument(spec, jsonText, sweep) : null),
    [view, spec, jsonText, sweep],
  );
  const jsonBuilt = useMemo<Built | null>(
    () =>
      jsonRead?.ok ? buildConfig(spec, draftsFrom(spec, jsonRead.config, jsonRead.grid), jsonRead.config, { sweep }) : null,
    [jsonRead, spec, sweep],
  );
  const built = view === "json" ? jsonBuilt : formBuilt;

  // ---- the form's own checks, shown once typed (an empty required field: once submitted)
  const shownErrors: Record<string, string> = {};
  for (const [path, error] of Object.entries(formBuilt.errors)) {
    if (error !== REQUIRED || attempted) shownErrors[path] = error;
  }
  const project = parseProject(projectValue);
  // The team the run goes to: a working directory is uploaded to it.
  const team = source
    ? source.project.team
    : !project.ok
      ? null
      : (projectList.find((p) => p.id === project.project || `${p.team.slug}/${p.name}` === project.project)?.team ??
        teams.data?.results.find((t) => typeof project.project === "string" && project.project.startsWith(`${t.slug}/`)) ??
        null);
  const tags = parseTags(tagsText);
  const seeds = parseSeeds(seedsText);
  const size = built && seeds.ok ? sweepSize(built.grid, seeds.seeds) : null;
  const topErrors: Record<string, string | null> = {
    project: !project.ok && !source && (attempted || projectValue !== "") ? project.error : null,
    name: name.trim().length > NAME_MAX ? `at most ${NAME_MAX} characters` : null,
    tags: tags.error,
    seeds: sweep && !seeds.ok ? seeds.error : null,
    grid:
      sweep && size && size.runs > MAX_SWEEP_RUNS
        ? `${size.runs} runs: a sweep makes at most ${MAX_SWEEP_RUNS}`
        : null,
  };

  // ---- the server's answer, placed
  const apiError = mutation.error instanceof ApiError ? mutation.error : null;
  const placed = placeServerErrors(spec, apiError?.fields ?? {}, TOP_FIELDS);
  const serverFields: Record<string, string[]> = {};
  for (const [path, messages] of Object.entries(placed.fields)) {
    if (refusedDrafts === null || drafts[path] === refusedDrafts[path]) serverFields[path] = messages;
  }
  const { "": configErrors, ...serverSections } = placed.sections;

  const isOpen = (path: string) =>
    toggled[path] ??
    (COMMON_SECTIONS.has(path) ||
      spec.fields.some(
        (f) => f.section === path && (shownErrors[f.path] || serverFields[f.path] || fieldStatus(f, drafts[f.path], sweep) === "swept"),
      ) ||
      Boolean(serverSections[path]));

  const changedCount = spec.fields.filter((f) => {
    const status = fieldStatus(f, drafts[f.path], sweep);
    return status === "changed" || status === "set" || status === "swept";
  }).length;

  const setDraft = (path: string, draft: Draft) => {
    setDrafts((old) => ({ ...old, [path]: draft }));
    setJsonNotice(null);
  };

  const resetMutations = () => {
    submitRun.reset();
    cloneRun.reset();
    submitSweep.reset();
    setRefusedDrafts(null);
  };

  const chooseRecipe = (next: string) => {
    setRecipeName(next);
    const nextRecipe = recipes.find((r) => r.name === next);
    const nextSpec = flattenSchema((nextRecipe?.config_schema ?? {}) as JsonSchema);
    setBase({});
    setDrafts(draftsFrom(nextSpec, {}));
    setToggled({});
    setAttempted(false);
    setView("form");
    resetMutations();
  };

  const resetConfig = () => {
    setBase(cloneJson(sourceConfig));
    setDrafts(draftsFrom(spec, sourceConfig));
    setAttempted(false);
  };

  const toggleSweep = (on: boolean) => {
    setSweep(on);
    if (!on) setDrafts((old) => collapseSweep(spec, old));
  };

  const showJson = () => {
    const bad = Object.entries(formBuilt.errors).filter(([, error]) => error !== REQUIRED);
    if (bad.length > 0) {
      setJsonNotice(`Fix ${bad.map(([path]) => path).join(", ")} first: the JSON is made of the form's values.`);
      return;
    }
    setJsonNotice(null);
    setJsonText(jsonDocument(formBuilt, sweep));
    setView("json");
  };

  const showForm = () => {
    const read = readJsonDocument(spec, jsonText, sweep);
    if (!read.ok) return; // its error shows under the JSON
    setBase(read.config);
    setDrafts(draftsFrom(spec, read.config, read.grid));
    setView("form");
  };

  const openSections = (paths: Iterable<string>) =>
    setToggled((old) => {
      const next = { ...old };
      for (const path of paths) next[path] = true;
      return next;
    });

  const focusFirst = (ids: string[]) => {
    // After React has drawn the sections just opened.
    setTimeout(() => {
      for (const id of ids) {
        const element = document.getElementById(id);
        if (element) {
          element.focus();
          return;
        }
      }
    }, 0);
  };

  const onRefused = (error: unknown, sent: Drafts) => {
    setRefusedDrafts(sent);
    if (!(error instanceof ApiError)) return;
    const where = placeServerErrors(spec, error.fields, TOP_FIELDS);
    const sections = [
      ...Object.keys(where.fields).map((path) => spec.byPath.get(path)?.section ?? ""),
      ...Object.keys(where.sections),
    ];
    openSections(sections);
    if (view === "form") focusFirst(Object.keys(where.fields).map(fieldId));
  };

  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    if (uploading) return; // the button says so
    setAttempted(true);
    let current: { drafts: Drafts; built: Built };
    if (view === "json") {
      if (!jsonRead?.ok || !jsonBuilt) return; // the JSON's own error is shown under it
      const jsonDrafts = draftsFrom(spec, jsonRead.config, jsonRead.grid);
      setBase(jsonRead.config);
      setDrafts(jsonDrafts);
      current = { drafts: jsonDrafts, built: jsonBuilt };
    } else current = { drafts, built: formBuilt };

    const configProblems = Object.keys(current.built.errors);
    const topProblems = Object.entries(topErrors).filter(([, error]) => error !== null);
    const projectMissing = !source && !project.ok;
    if (configProblems.length > 0 || topProblems.length > 0 || projectMissing) {
      openSections(configProblems.map((path) => spec.byPath.get(path)?.section ?? ""));
      const topIds = [projectMissing ? "submit-project" : null, ...topProblems.map(([key]) => `submit-${key}`)];
      focusFirst([...topIds.filter((id): id is string => id !== null), ...configProblems.map(fieldId)]);
      return;
    }

    const { config, grid } = current.built;
    const sent = current.drafts;
    const trimmedName = name.trim();
    const projectRef = source ? source.project.id : project.ok ? project.project : null;
    if (projectRef === null) return;
    setRefusedDrafts(null);
    if (sweep) {
      if (!seeds.ok) return;
      const body: SweepSubmitBody = {
        project: projectRef,
        name: trimmedName,
        recipe: recipeName,
        config,
        tags: tags.tags,
        grid,
        seeds: seeds.seeds,
      };
      attempt.current = sweepAttempt(attempt.current, JSON.stringify(body));
      submitSweep.mutate(
        { body, key: attempt.current.key },
        {
          onSuccess: ({ group }) => void navigate(`/groups/${group.id}`),
          onError: (error) => onRefused(error, sent),
        },
      );
    } else if (source) {
      cloneRun.mutate(
        { name: trimmedName, config, tags: tags.tags },
        { onSuccess: (run) => void navigate(`/runs/${run.id}`), onError: (error) => onRefused(error, sent) },
      );
    } else {
      submitRun.mutate(
        { project: projectRef, name: trimmedName, recipe: recipeName, config, tags: tags.tags },
        { onSuccess: (run) => void navigate(`/runs/${run.id}`), onError: (error) => onRefused(error, sent) },
      );
    }
  };

  const placedOnForm = (path: string) => {
    const bare = path.replace(/\[\d+\].*$/, "");
    if ((TOP_FIELDS as readonly string[]).includes(bare)) return true;
    return view === "form" && (path === "config" || path.startsWith("config.") || path.startsWith("config["));
  };

  const submitLabel = sweep
    ? `Submit sweep${size ? ` (${plural(size.runs, "run")})` : ""}`
    : source
      ? `Clone run #${source.id}`
      : "Submit run";
  const knownProject =
    project.ok && projectList.some((p) => p.id === project.project || `${p.team.slug}/${p.name}` === project.project);

  return (
    <form className="form submit-form" noValidate onSubmit={onSubmit} data-testid="submit-form">
      <FormError
        error={mutation.error}
        title={sweep ? "The sweep was not submitted" : source ? "The clone was not submitted" : "The run was not submitted"}
        placed={placedOnForm}
      />
      {sweep && mayRetry(mutation.error) ? (
        <p className="notice" data-testid="sweep-retry-note">
          Submitting again is safe: the sweep goes with the same Idempotency-Key, so the server makes it once even if
          the first request got through.
        </p>
      ) : !sweep && mayRetry(mutation.error) ? (
        <p className="notice" data-testid="run-retry-note">
          The request may have reached the server: look for the {source ? "clone" : "run"} in the{" "}
          <Link to="/">runs list</Link> before submitting again.
        </p>
      ) : null}

      <div className="submit-basics">
        <div className="field">
          <label htmlFor="submit-project">Project</label>
          {source ? (
            <p className="submit-fixed">
              <code>
                {source.project.team.slug}/{source.project.name}
              </code>{" "}
              <span className="muted small">a clone stays in its run's project</span>
            </p>
          ) : (
            <>
              <input
                id="submit-project"
                list="submit-project-list"
                value={projectValue}
                placeholder={projects.isPending ? "Loading projects…" : "team/project"}
                onChange={(event) => setProjectText(event.target.value)}
                aria-invalid={Boolean(topErrors.project || placed.top.project)}
                aria-describedby="submit-project-help"
                autoComplete="off"
                spellCheck={false}
                data-testid="submit-project"
              />
              <datalist id="submit-project-list">
                {projectList.map((p) => (
                  <option key={p.id} value={`${p.team.slug}/${p.name}`} />
                ))}
              </datalist>
              <span className="muted small" id="submit-project-help">
                {projects.isError
                  ? "Cannot load your projects: type team/project."
                  : project.ok && !knownProject && projects.isSuccess
                    ? `A new project ${String(project.project)} will be made.`
                    : "One of yours, or team/project for a new one."}
              </span>
            </>
          )}
          <FieldError messages={topErrors.project ? [topErrors.project] : undefined} testId="submit-project-error" />
          <FieldError messages={placed.top.project} testId="submit-project-server-error" />
        </div>
        <div className="field">
          <label htmlFor="submit-recipe">Recipe</label>
          <select
            id="submit-recipe"
            value={recipeName}
            disabled={source !== null}
            onChange={(event) => chooseRecipe(event.target.value)}
            data-testid="submit-recipe"
          >
            {recipes.map((r) => (
              <option key={r.name} value={r.name}>
                {r.name}
              </option>
            ))}
          </select>
          <FieldError messages={placed.top.recipe} />
        </div>
        <div className="field">
          <label htmlFor="submit-name">Name</label>
          <input
            id="submit-name"
            value={name}
            placeholder={source ? `${source.name}-clone` : sweep ? `${recipeName} sweep` : `${recipeName}-… (made up)`}
            onChange={(event) => setName(event.target.value)}
            aria-invalid={Boolean(topErrors.name || placed.top.name)}
            autoComplete="off"
            data-testid="submit-name"
          />
          <FieldError messages={topErrors.name ? [topErrors.name] : undefined} />
          <FieldError messages={placed.top.name} testId="submit-name-server-error" />
        </div>
        <div className="field">
          <label htmlFor="submit-tags">Tags</label>
          <input
            id="submit-tags"
            value={tagsText}
            placeholder="baseline, lr-sweep"
            onChange={(event) => setTagsText(event.target.value)}
            aria-invalid={Boolean(topErrors.tags || placed.top.tags)}
            autoComplete="off"
            spellCheck={false}
            data-testid="submit-tags"
          />
          <FieldError messages={topErrors.tags ? [topErrors.tags] : undefined} />
          <FieldError messages={placed.top.tags} testId="submit-tags-server-error" />
        </div>
      </div>
      {recipe?.description ? <p className="muted recipe-description">{recipe.description}</p> : null}
      {spec.fields.some((f) => f.ui === "working-dir") ? (
        <p className="muted small secrets-note" data-testid="secrets-note">
          Credentials (an API key, a hub token) do not belong in the config, which anyone reading the run sees: set them as{" "}
          {team ? <Link to={`/teams/${team.id}/settings`}>{team.name}'s secrets</Link> : "the team's secrets"}, which every
          command run of the team gets as environment variables and no page shows.
        </p>
      ) : null}

      <div className="cfg-toolbar">
        <h2>Config</h2>
        <span className="muted small" data-testid="changed-count">
          {changedCount === 0 ? "all defaults" : `${changedCount} changed from the defaults`}
        </span>
        <span className="spacer" />
        <label className="sweep-toggle" title={view === "json" ? "Switch to the form to turn the sweep on or off" : undefined}>
          <input
            type="checkbox"
            checked={sweep}
            disabled={view === "json"}
            onChange={(event) => toggleSweep(event.target.checked)}
            data-testid="sweep-toggle"
          />{" "}
          Sweep
        </label>
        <div className="view-toggle" role="group" aria-label="Config view">
          <button type="button" aria-pressed={view === "form"} onClick={showForm} data-testid="view-form">
            Form
          </button>
          <button type="button" aria-pressed={view === "json"} onClick={() => view === "form" && showJson()} data-testid="view-json">
            JSON
          </button>
        </div>
        {view === "form" ? (
          <button type="button" className="link-button" onClick={resetConfig} data-testid="reset-config">
            {source ? `Reset to run #${source.id}'s config` : "Reset to defaults"}
          </button>
        ) : null}
      </div>
      {jsonNotice && view === "form" ? (
        <p className="field-error" role="alert" data-testid="json-notice">
          {jsonNotice}
        </p>
      ) : null}

      {sweep ? (
        <div className="sweep-bar" data-testid="sweep-bar">
          <div className="field">
            <label htmlFor="submit-seeds">Seeds</label>
            <input
              id="submit-seeds"
              type="number"
              min={1}
              max={100}
              step={1}
              value={seedsText}
              onChange={(event) => setSeedsText(event.target.value)}
              aria-invalid={Boolean(topErrors.seeds || placed.top.seeds)}
              data-testid="sweep-seeds"
            />
            <FieldError messages={topErrors.seeds ? [topErrors.seeds] : undefined} />
            <FieldError messages={placed.top.seeds} />
          </div>
          <div className="sweep-summary">
            <p className="sweep-count" data-testid="sweep-count">
              {built && seeds.ok ? describeRunCount(built.grid, seeds.seeds) : "–"}
            </p>
            <p className="muted small">
              Give any field several values, comma-separated (<code>1e-6, 3e-6</code>): one run per combination and
              seed (seeds 0 to n−1), gathered in a group.
            </p>
            <FieldError messages={topErrors.grid ? [topErrors.grid] : undefined} testId="sweep-too-big" />
            <FieldError messages={placed.top.grid} />
          </div>
        </div>
      ) : null}

      {view === "form" ? (
        <>
          <FieldError messages={configErrors} testId="config-errors" />
          <ConfigForm
            spec={spec}
            drafts={drafts}
            onDraft={setDraft}
            sweep={sweep}
            errors={shownErrors}
            serverFields={serverFields}
            serverSections={serverSections}
            isOpen={isOpen}
            onToggle={(path) => setToggled((old) => ({ ...old, [path]: !isOpen(path) }))}
            team={team}
            onUploadBusy={setUploading}
          />
        </>
      ) : (
        <JsonEditor
          text={jsonText}
          onText={setJsonText}
          sweep={sweep}
          readError={jsonRead && !jsonRead.ok ? jsonRead.error : null}
          errors={jsonBuilt ? jsonBuilt.errors : {}}
          attempted={attempted}
        />
      )}

      {source && built ? <CloneDiff source={source} sourceConfig={sourceConfig} built={built} sweep={sweep} /> : null}

      <div className="form-actions">
        <button type="submit" className="primary" disabled={mutation.isPending || uploading} data-testid="submit">
          {mutation.isPending ? "Submitting…" : uploading ? "Uploading the working directory…" : submitLabel}
        </button>
        <Link to={source ? `/runs/${source.id}` : "/"}>Cancel</Link>
      </div>
    </form>
  );
}

function JsonEditor({
  text,
  onText,
  sweep,
  readError,
  errors,
  attempted,
}: {
  text: string;
  onText: (text: string) => void;
  sweep: boolean;
  readError: string | null;
  errors: Record<string, string>;
  attempted: boolean;
}) {
  const shown = Object.entries(errors).filter(([, error]) => error !== REQUIRED || attempted);
  return (
    <div className="cfg-json field">
      <label htmlFor="config-json" className="muted small">
        {sweep
          ? 'The sweep\'s "config" and "grid", as POST /api/v1/sweeps takes them.'
          : "The config, as POST /api/v1/runs takes it: keys left out take the recipe's defaults."}
      </label>
      <textarea
        id="config-json"
        className="cfg-json-text"
        rows={Math.min(40, Math.max(8, text.split("\n").length + 1))}
        spellCheck={false}
        value={text}
        onChange={(event) => onText(event.target.value)}
        aria-invalid={Boolean(readError) || shown.length > 0}
        data-testid="config-json"
      />
      {readError ? (
        <p className="field-error" role="alert" data-testid="json-error">
          {readError}
        </p>
      ) : null}
      {shown.length > 0 ? (
        <ul className="field-error" role="alert" data-testid="json-field-errors">
          {shown.map(([path, error]) => (
            <li key={path}>
              <code>{path}</code>: {error}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

function shown(value: Json | undefined): string {
  return value === undefined ? "absent" : JSON.stringify(value);
}

/** What the clone changes of its source's config, before it is sent. */
function CloneDiff({
  source,
  sourceConfig,
  built,
  sweep,
}: {
  source: RunDetail;
  sourceConfig: JsonObject;
  built: Built;
  sweep: boolean;
}) {
  // A sweep's seed is its seeds': said in the sweep bar, not here.
  const changes = diffConfigs(sourceConfig, built.config).filter((c) => !(sweep && c.path === SEED_PATH));
  const swept = Object.entries(built.grid);
  return (
    <section className="panel clone-diff" data-testid="clone-diff" aria-live="polite">
      <h2>Changes from run #{source.id}</h2>
      {changes.length === 0 && swept.length === 0 ? (
        <p className="muted" data-testid="clone-diff-empty">
          No changes yet: the clone runs run #{source.id}'s config as it was.
        </p>
      ) : (
        <ul className="diff-list">
          {changes.map((change) => (
            <li key={change.path} data-testid={`diff-${change.path}`}>
              <code>{change.path}</code>: <span className="diff-old">{shown(change.before)}</span> →{" "}
              <span className="diff-new">{shown(change.after)}</span>
            </li>
          ))}
          {swept.map(([path, values]) => (
            <li key={path} data-testid={`diff-${path}`}>
              <code>{path}</code>: <span className="diff-old">{shown(getPath(sourceConfig, path))}</span> →{" "}
              <span className="diff-new">{values.map((v) => JSON.stringify(v)).join(", ")}</span>{" "}
              <span className="badge badge-swept">swept</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
