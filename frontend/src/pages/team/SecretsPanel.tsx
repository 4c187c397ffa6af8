/**
 * A team's secrets: the environment variables every command run of the team gets, which no
 * page, answer or log shows. Everyone in the team reads their names and when they changed;
 * admins set one (the value typed into a password input, sent once, never shown again) and
 * delete one after saying so.
 */
import { useRef, useState, type FormEvent } from "react";

import { ApiError } from "../../api/client";
import type { Team } from "../../api/types";
import { TableState } from "../../components/TableState";
import { formatDateTime } from "../../format";
import { FieldError, FormError } from "../evals/forms";
import { useDeleteSecret, useSetSecret, useTeamSecrets } from "./api";

const HEADERS = ["name", "last set", "by", ""];

export function SecretsPanel({ team }: { team: Pick<Team, "id" | "name" | "role"> }) {
  const admin = team.role === "admin";
  const secrets = useTeamSecrets(team.id);
  const setSecret = useSetSecret(team.id);
  const deleteSecret = useDeleteSecret(team.id);
  const [name, setName] = useState("");
  const [value, setValue] = useState("");
  const [confirming, setConfirming] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const valueInput = useRef<HTMLInputElement>(null);
  const rows = secrets.data ?? [];
  const fields = setSecret.error instanceof ApiError ? setSecret.error.fields : {};

  const onSet = (event: FormEvent) => {
    event.preventDefault();
    const trimmed = name.trim();
    if (!trimmed || !value) return;
    setNotice(null);
    setSecret.mutate(
      { name: trimmed, value },
      {
        onSuccess: () => {
          const replaced = rows.some((s) => s.name === trimmed);
          setNotice(`${trimmed} ${replaced ? "replaced" : "set"}: command runs submitted from now on get it.`);
          setName("");
          setValue("");
        },
      },
    );
  };

  const onDelete = (secret: string) => {
    setNotice(null);
    deleteSecret.mutate(secret, {
      onSuccess: () => {
        setConfirming(null);
        setNotice(`${secret} deleted: command runs submitted from now on do not get it.`);
      },
    });
  };

  return (
    <section className="panel secrets-panel" data-testid="secrets-panel">
      <h2>Secrets</h2>
      <p className="muted small">
        Environment variables every command run of {team.name} gets, such as <code>HF_TOKEN</code> or{" "}
        <code>WANDB_API_KEY</code>. Their values are never shown: not here, not in a run's config, not in its logs
        (Barrel redacts them from the log tails it keeps).{" "}
        {admin ? "As an admin you set and delete them." : "Only the team's admins set and delete them."}
      </p>
      {secrets.isError ? <FormError error={secrets.error} title="Cannot load the secrets" placed={() => false} /> : null}
      {deleteSecret.isError ? (
        <FormError error={deleteSecret.error} title="The secret was not deleted" placed={() => false} />
      ) : null}
      {notice ? (
        <p className="secrets-done" role="status" data-testid="secrets-notice">
          {notice}
        </p>
      ) : null}
      <table className="table secrets-table" data-testid="secrets-table">
        <thead>
          <tr>
            {HEADERS.map((h, i) => (
              <th key={i}>{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((secret) => (
            <tr key={secret.name} data-testid="secret-row" data-name={secret.name}>
              <td>
                <code>{secret.name}</code>
              </td>
              <td className="muted">{formatDateTime(secret.updated_at)}</td>
              <td className="muted">{secret.updated_by ?? "–"}</td>
              <td className="secrets-actions">
                {!admin ? null : confirming === secret.name ? (
                  <span className="secrets-confirm" role="group" aria-label={`Delete ${secret.name}?`}>
                    <span>Delete {secret.name}? Runs already started keep it.</span>{" "}
                    <button
                      type="button"
                      className="danger"
                      disabled={deleteSecret.isPending}
                      onClick={() => onDelete(secret.name)}
                      data-testid="secret-delete-confirm"
                    >
                      {deleteSecret.isPending ? "Deleting…" : "Delete"}
                    </button>{" "}
                    <button type="button" onClick={() => setConfirming(null)} data-testid="secret-delete-cancel">
                      Keep
                    </button>
                  </span>
                ) : (
                  <>
                    <button
                      type="button"
                      className="link-button"
                      onClick={() => {
                        setName(secret.name);
                        setValue("");
                        valueInput.current?.focus();
                      }}
                      data-testid="secret-replace"
                    >
                      Replace value
                    </button>{" "}
                    <button
                      type="button"
                      className="link-button danger-link"
                      onClick={() => {
                        deleteSecret.reset();
                        setConfirming(secret.name);
                      }}
                      data-testid="secret-delete"
                    >
                      Delete…
                    </button>
                  </>
                )}
              </td>
            </tr>
          ))}
          <TableState
            pending={secrets.isPending}
            isEmpty={secrets.isSuccess && rows.length === 0}
            empty={`${team.name} has no secrets yet.`}
            columns={HEADERS.length}
          />
        </tbody>
      </table>
      {admin ? (
        <form className="form secrets-form" onSubmit={onSet} noValidate data-testid="secret-form">
          <h3>Set a secret</h3>
          <FormError
            error={setSecret.error}
            title="The secret was not set"
            placed={(path) => path === "name" || path === "value"}
          />
          <div className="secrets-form-row">
            <div className="field">
              <label htmlFor="secret-name">Name</label>
              <input
                id="secret-name"
                value={name}
                placeholder="HF_TOKEN"
                onChange={(event) => setName(event.target.value)}
                aria-invalid={Boolean(fields.name)}
                spellCheck={false}
                autoComplete="off"
                data-testid="secret-name"
              />
              <FieldError messages={fields.name} testId="secret-name-error" />
            </div>
            <div className="field">
              <label htmlFor="secret-value">Value</label>
              <input
                id="secret-value"
                ref={valueInput}
                type="password"
                value={value}
                placeholder={rows.some((s) => s.name === name.trim()) ? "the new value" : "written once, never shown"}
                onChange={(event) => setValue(event.target.value)}
                aria-invalid={Boolean(fields.value)}
                autoComplete="new-password"
                spellCheck={false}
                data-testid="secret-value"
              />
              <FieldError messages={fields.value} testId="secret-value-error" />
            </div>
            <button
              type="submit"
              className="primary"
              disabled={setSecret.isPending || !name.trim() || !value}
              data-testid="secret-set"
            >
              {setSecret.isPending ? "Saving…" : rows.some((s) => s.name === name.trim()) ? "Replace" : "Set"}
            </button>
          </div>
        </form>
      ) : null}
    </section>
  );
}
