/**
 * The config form a recipe's schema generates: one collapsible section per nested model, one
 * input per field by its type, each with its default, its bounds and its help, and its problems
 * (the form's own checks, then the server's) beneath it.
 */
import type { ReactNode } from "react";
import { Link } from "react-router";

import { FieldError } from "../evals/forms";
import { KeyValueEditor } from "./KeyValueEditor";
import {
  describeBounds,
  describeDefault,
  fieldStatus,
  formatScalar,
  isSweepable,
  mapDraft,
  mapRows,
  SEED_PATH,
  splitList,
  type Draft,
  type Drafts,
  type Field,
  type FieldStatus,
  type FormSpec,
  type Section,
} from "./schemaForm";
import { shellSplit } from "./shlex";
import { WorkingDirField } from "./WorkingDirField";
import { plural } from "../../format";

/** A variable name that says it holds a credential (HF_TOKEN, WANDB_API_KEY, DB_PASSWORD...). */
const CREDENTIAL = /(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL)/i;

/** The select option that stands for JSON null. */
const UNSET = "\u0000unset";

export interface ConfigFormProps {
  spec: FormSpec;
  drafts: Drafts;
  onDraft: (path: string, draft: Draft) => void;
  sweep: boolean;
  /** The form's own problems to show, by field path. */
  errors: Record<string, string>;
  /** The server's, by field path and by section path (not "": the caller shows those). */
  serverFields: Record<string, string[]>;
  serverSections: Record<string, string[]>;
  isOpen: (section: string) => boolean;
  onToggle: (section: string) => void;
  /** The team the run goes to, where a field uploads to it (x-ui "working-dir"). */
  team?: { id: number; name: string } | null;
  /** Whether an upload is under way. */
  onUploadBusy?: (busy: boolean) => void;
}

/** The fields with a row of their own first (a command, its env...), then the grid of the others:
 * a narrow field before a wide one would sit alone on its row. */
function wideFirst(fields: Field[]): Field[] {
  return [...fields.filter(isWide), ...fields.filter((f) => !isWide(f))];
}

/** Fields that take a row of their own: a line, a list, rows of names and values. */
function isWide(field: Field): boolean {
  return field.kind === "command" || field.kind === "lines" || field.kind === "map" || field.ui === "working-dir";
}

export function fieldId(path: string): string {
  return `cfg-${path}`;
}

export function sectionLabel(path: string): string {
  return path ? path.split(".").join(" › ") : "general";
}

export function ConfigForm(props: ConfigFormProps) {
  return (
    <div className="cfg-sections">
      {props.spec.sections.map((section) => (
        <ConfigSection key={section.path} section={section} {...props} />
      ))}
    </div>
  );
}

function ConfigSection({ section, ...props }: ConfigFormProps & { section: Section }) {
  const { drafts, sweep, errors, serverFields, serverSections } = props;
  const open = props.isOpen(section.path);
  const statuses = section.fields.map((f) => fieldStatus(f, drafts[f.path], sweep));
  const changed = statuses.filter((s) => s === "changed" || s === "set" || s === "swept").length;
  const problems =
    section.fields.filter((f) => errors[f.path] || serverFields[f.path]).length + (serverSections[section.path] ? 1 : 0);
  const bodyId = `cfg-section-${section.path || "general"}`;
  return (
    <section className="cfg-section" data-testid={`section-${section.path || "general"}`}>
      <h3 className="cfg-section-head">
        <button
          type="button"
          className="cfg-section-toggle"
          aria-expanded={open}
          aria-controls={bodyId}
          onClick={() => props.onToggle(section.path)}
          data-testid={`section-toggle-${section.path || "general"}`}
        >
          <span aria-hidden="true">{open ? "▾" : "▸"}</span> <code>{sectionLabel(section.path)}</code>
        </button>
        <span className="muted small">
          {plural(section.fields.length, "field")}
          {changed > 0 ? ` · ${changed} changed` : ""}
        </span>
        {problems > 0 ? (
          <span className="cfg-problems small">
            {plural(problems, "problem")}
          </span>
        ) : null}
      </h3>
      {section.description ? <p className="muted small cfg-section-help">{section.description}</p> : null}
      <FieldError messages={serverSections[section.path]} testId={`section-error-${section.path || "general"}`} />
      {open ? (
        <div className="cfg-grid" id={bodyId}>
          {wideFirst(section.fields).map((field) => (
            <ConfigField
              key={field.path}
              field={field}
              draft={drafts[field.path] ?? ""}
              status={statuses[section.fields.indexOf(field)] ?? "default"}
              onDraft={(draft) => props.onDraft(field.path, draft)}
              sweep={sweep}
              error={errors[field.path]}
              server={serverFields[field.path]}
              team={props.team ?? null}
              onUploadBusy={props.onUploadBusy}
            />
          ))}
        </div>
      ) : null}
    </section>
  );
}

const BADGE_TEXT: Record<FieldStatus, string | null> = {
  default: "default",
  changed: "changed",
  set: "set",
  swept: "swept",
  invalid: null,
};

function ConfigField({
  field,
  draft,
  status,
  onDraft,
  sweep,
  error,
  server,
  team,
  onUploadBusy,
}: {
  field: Field;
  draft: Draft;
  status: FieldStatus;
  onDraft: (draft: Draft) => void;
  sweep: boolean;
  error: string | undefined;
  server: string[] | undefined;
  team: { id: number; name: string } | null;
  onUploadBusy: ((busy: boolean) => void) | undefined;
}) {
  const id = fieldId(field.path);
  const helpId = `${id}-help`;
  const invalid = Boolean(error || server);
  const bounds = describeBounds(field);
  const swept = sweep && isSweepable(field);
  const bySeeds = sweep && field.path === SEED_PATH;
  const badge = BADGE_TEXT[status];
  const control = bySeeds ? (
    <input id={id} value="" placeholder="from Seeds" disabled data-testid={`cfg-input-${field.path}`} />
  ) : (
    <FieldControl
      field={field}
      draft={draft}
      onDraft={onDraft}
      sweep={swept}
      invalid={invalid}
      helpId={helpId}
      team={team}
      onUploadBusy={onUploadBusy}
    />
  );
  const inline = field.kind === "boolean" && !field.nullable && !swept;
  return (
    <div className={`cfg-field cfg-${status}${isWide(field) ? " cfg-wide" : ""}`} data-testid={`cfg-field-${field.path}`}>
      <div className="cfg-label-row">
        {inline ? control : null}
        <label htmlFor={id} className="cfg-label">
          <code>{field.key}</code>
        </label>
        {field.required ? <span className="badge badge-required">required</span> : null}
        {badge ? (
          <span className={`badge badge-${status}`} data-testid={`cfg-badge-${field.path}`}>
            {badge}
          </span>
        ) : null}
      </div>
      {inline ? null : control}
      {field.kind === "command" && draft ? <CommandWords line={draft} path={field.path} /> : null}
      {field.nullable && !bySeeds && !field.readOnly && !(field.hasDefault && field.default === null) && field.kind !== "enum" ? (
        <label className="cfg-unset small">
          <input
            type="checkbox"
            checked={draft === null}
            onChange={(event) => onDraft(event.target.checked ? null : "")}
            data-testid={`cfg-unset-${field.path}`}
          />{" "}
          unset (null)
        </label>
      ) : null}
      <p className="cfg-help small" id={helpId}>
        {bySeeds ? (
          <span>Set by the sweep: its runs take seeds 0 to n−1, n the Seeds above.</span>
        ) : (
          <>
            {field.description ? <span>{field.description} </span> : null}
            <span className="muted">{[describeDefault(field), bounds].filter(Boolean).join(" · ")}</span>
          </>
        )}
      </p>
      {error ? (
        <p className="field-error" role="alert" data-testid={`cfg-error-${field.path}`}>
          {error}
        </p>
      ) : null}
      <FieldError messages={server} testId={`cfg-server-error-${field.path}`} />
    </div>
  );
}

function placeholderOf(field: Field): string {
  if (field.hasDefault) {
    if (field.default === null) return "unset";
    return typeof field.default === "object" ? JSON.stringify(field.default) : formatScalar(field.default ?? null);
  }
  return field.required ? "required" : "recipe default";
}

function FieldControl({
  field,
  draft,
  onDraft,
  sweep,
  invalid,
  helpId,
  team = null,
  onUploadBusy,
}: {
  field: Field;
  draft: Draft;
  onDraft: (draft: Draft) => void;
  sweep: boolean;
  invalid: boolean;
  helpId: string;
  team?: { id: number; name: string } | null;
  onUploadBusy?: ((busy: boolean) => void) | undefined;
}): ReactNode {
  const id = fieldId(field.path);
  const common = {
    id,
    "aria-invalid": invalid,
    "aria-describedby": helpId,
    "data-testid": `cfg-input-${field.path}`,
  };

  if (field.readOnly) {
    return <input {...common} value={field.options.map(formatScalar).join(", ")} readOnly disabled />;
  }

  if (sweep && (field.kind === "enum" || field.kind === "boolean")) {
    const options = field.kind === "boolean" ? ["true", "false"] : field.options.map(formatScalar);
    const chosen = new Set(draft === null ? [] : splitList(draft));
    const toggle = (option: string, on: boolean) => {
      const next = options.filter((o) => (o === option ? on : chosen.has(o)));
      onDraft(next.join(", "));
    };
    return (
      <div className="cfg-choices" role="group" aria-label={field.key} id={id} data-testid={common["data-testid"]}>
        {options.map((option) => (
          <label key={option} className="small">
            <input
              type="checkbox"
              checked={chosen.has(option)}
              onChange={(event) => toggle(option, event.target.checked)}
              data-testid={`cfg-choice-${field.path}-${option}`}
            />{" "}
            <code>{option}</code>
          </label>
        ))}
      </div>
    );
  }

  if (field.kind === "boolean" && !field.nullable) {
    const checked = draft === "" ? field.default === true : draft === "true";
    return (
      <input {...common} type="checkbox" checked={checked} onChange={(event) => onDraft(String(event.target.checked))} />
    );
  }

  if (field.kind === "enum" || field.kind === "boolean") {
    const options = field.kind === "boolean" ? [true, false] : field.options;
    const shown =
      draft === null
        ? UNSET
        : draft !== ""
          ? draft
          : !field.hasDefault
            ? ""
            : field.default === null
              ? UNSET
              : formatScalar(field.default ?? null);
    return (
      <select
        {...common}
        value={shown}
        onChange={(event) => {
          const value = event.target.value;
          onDraft(value === UNSET ? (field.hasDefault && field.default === null ? "" : null) : value);
        }}
      >
        {!field.hasDefault ? <option value="">{field.required ? "choose…" : "recipe default"}</option> : null}
        {options.map((option) => (
          <option key={formatScalar(option)} value={formatScalar(option)}>
            {formatScalar(option)}
          </option>
        ))}
        {field.nullable ? <option value={UNSET}>unset (null)</option> : null}
      </select>
    );
  }

  if (field.ui === "working-dir" && field.kind === "string") {
    return (
      <WorkingDirField
        id={id}
        path={field.path}
        draft={draft}
        onDraft={onDraft}
        invalid={invalid}
        helpId={helpId}
        team={team}
        onBusy={onUploadBusy}
      />
    );
  }

  if (field.kind === "map") {
    const rows = mapRows(draft);
    const credentials = rows.filter(([name, item]) => item !== "" && CREDENTIAL.test(name)).map(([name]) => name.trim());
    return (
      <>
        <KeyValueEditor
          id={id}
          rows={rows}
          onRows={(next) => onDraft(next.length > 0 ? mapDraft(next) : "")}
          invalid={invalid}
          helpId={helpId}
          testId={common["data-testid"]}
        />
        {credentials.length > 0 ? (
          <p className="cfg-credential small" role="status" data-testid={`cfg-credential-${field.path}`}>
            {credentials.join(", ")} {credentials.length === 1 ? "looks like a credential" : "look like credentials"}:
            the config is shown to everyone who can read the run. Set {credentials.length === 1 ? "it" : "them"} as{" "}
            {team ? <Link to={`/teams/${team.id}/settings`}>{team.name}&apos;s secrets</Link> : "the team's secrets"}{" "}
            instead.
          </p>
        ) : null}
      </>
    );
  }

  if (field.kind === "lines") {
    const count = (draft ?? "").split("\n").length;
    return (
      <textarea
        {...common}
        className="cfg-lines-input"
        rows={Math.min(12, Math.max(3, count + 1))}
        spellCheck={false}
        placeholder={field.item?.kind === "string" ? "one per line" : placeholderOf(field)}
        value={draft ?? ""}
        onChange={(event) => onDraft(event.target.value)}
      />
    );
  }

  if (field.kind === "command") {
    return (
      <input
        {...common}
        className="cfg-command-input"
        placeholder={draft === null ? "unset" : "python train.py --lr 1e-6"}
        value={draft ?? ""}
        onChange={(event) => onDraft(event.target.value)}
        spellCheck={false}
        autoComplete="off"
      />
    );
  }

  if (field.kind === "json") {
    return (
      <textarea
        {...common}
        className="cfg-json-input"
        rows={3}
        spellCheck={false}
        placeholder={placeholderOf(field)}
        value={draft ?? ""}
        onChange={(event) => onDraft(event.target.value)}
      />
    );
  }

  const numeric = (field.kind === "integer" || field.kind === "number") && !sweep;
  return (
    <input
      {...common}
      type={numeric ? "number" : "text"}
      inputMode={field.kind === "integer" ? "numeric" : field.kind === "number" ? "decimal" : undefined}
      step={numeric ? (field.kind === "integer" ? 1 : "any") : undefined}
      min={numeric ? field.minimum : undefined}
      max={numeric ? field.maximum : undefined}
      placeholder={draft === null ? "unset" : placeholderOf(field)}
      value={draft ?? ""}
      onChange={(event) => onDraft(event.target.value)}
      spellCheck={false}
      autoComplete="off"
    />
  );
}

/** The words a command line splits into, as the server will split it (its answer is the truth:
 * a line it cannot split is refused beside the field). */
function CommandWords({ line, path }: { line: string; path: string }) {
  const split = shellSplit(line);
  if (!split.ok) {
    return (
      <p className="muted small cfg-words" data-testid={`cfg-words-${path}`}>
        Cannot be split into words: {split.error}.
      </p>
    );
  }
  return (
    <p className="muted small cfg-words" data-testid={`cfg-words-${path}`}>
      {split.words.length} {split.words.length === 1 ? "word" : "words"}:{" "}
      {split.words.map((word, index) => (
        <code key={index} className="cfg-word">
          {word}
        </code>
      ))}
    </p>
  );
}
