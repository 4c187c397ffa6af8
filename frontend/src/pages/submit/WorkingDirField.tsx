/**
 * A working directory for a command run (a field with x-ui "working-dir"): a .zip picked here is
 * uploaded to the run's team (POST /teams/{id}/working-dirs) with a progress bar, and the hash it
 * is stored under fills the field; a hash can be pasted too (`barrel submit` prints none, but a
 * clone has one). The browser zips nothing: the page says how to make the zip.
 */
import { useEffect, useRef, useState } from "react";

import { ApiError, errorMessage } from "../../api/client";
import { formatBytes } from "../run/artifacts";
import { uploadWorkingDir, type UploadProgress, type WorkingDir } from "./api";
import type { Draft } from "./schemaForm";

type Upload =
  | { state: "idle" }
  | { state: "uploading"; name: string; progress: UploadProgress; abort: AbortController }
  | { state: "done"; name: string; stored: WorkingDir }
  | { state: "failed"; name: string; error: unknown };

export interface WorkingDirFieldProps {
  id: string;
  path: string;
  draft: Draft;
  onDraft: (draft: Draft) => void;
  invalid: boolean;
  helpId: string;
  /** The team the run goes to (its project's); null until the project is known. */
  team: { id: number; name: string } | null;
  /** Says whether an upload is under way, so that the form is not sent without its directory. */
  onBusy?: (busy: boolean) => void;
  /** For tests: the upload. */
  upload?: typeof uploadWorkingDir;
}

/** Why an upload failed, as a person acts on it. */
export function uploadProblem(error: unknown): string {
  if (error instanceof ApiError && error.status === 413) return `Too large: ${error.message}`;
  if (error instanceof ApiError && error.status === 403) return `Not allowed: ${error.message}`;
  return errorMessage(error);
}

export function WorkingDirField(props: WorkingDirFieldProps) {
  const { id, path, draft, onDraft, team, onBusy } = props;
  const [upload, setUpload] = useState<Upload>({ state: "idle" });
  const [over, setOver] = useState(false);
  const fileInput = useRef<HTMLInputElement>(null);
  const busy = upload.state === "uploading";
  useEffect(() => onBusy?.(busy), [busy, onBusy]);
  // An upload still going when the form goes away is stopped.
  const current = useRef<AbortController | null>(null);
  useEffect(() => () => current.current?.abort(), []);

  const start = (file: File) => {
    if (!team) return;
    const abort = new AbortController();
    current.current = abort;
    setUpload({ state: "uploading", name: file.name, progress: { loaded: 0, total: file.size }, abort });
    (props.upload ?? uploadWorkingDir)(
      team.id,
      file,
      (progress) => setUpload((old) => (old.state === "uploading" && old.abort === abort ? { ...old, progress } : old)),
      abort.signal,
    ).then(
      (stored) => {
        setUpload({ state: "done", name: file.name, stored });
        onDraft(stored.ref);
      },
      (error: unknown) => {
        if (error instanceof DOMException && error.name === "AbortError") setUpload({ state: "idle" });
        else setUpload({ state: "failed", name: file.name, error });
      },
    );
  };

  const percent =
    upload.state === "uploading" && upload.progress.total > 0
      ? Math.min(100, Math.round((100 * upload.progress.loaded) / upload.progress.total))
      : 0;

  return (
    <div
      className={`wd-field${over ? " wd-over" : ""}`}
      data-testid={`cfg-workdir-${path}`}
      // A .zip dropped on the field uploads as one picked.
      onDragOver={(event) => {
        if (!team || busy || !event.dataTransfer.types.includes("Files")) return;
        event.preventDefault();
        setOver(true);
      }}
      onDragLeave={() => setOver(false)}
      onDrop={(event) => {
        setOver(false);
        const file = event.dataTransfer.files[0];
        if (!team || busy || !file) return;
        event.preventDefault();
        start(file);
      }}
    >
      <div className="wd-row">
        <input
          ref={fileInput}
          type="file"
          accept=".zip,application/zip,application/x-zip-compressed"
          className="wd-file"
          disabled={!team || busy}
          onChange={(event) => {
            const file = event.target.files?.[0];
            event.target.value = ""; // the same file picked again uploads again
            if (file) start(file);
          }}
          aria-label={`Upload a .zip${team ? ` to ${team.name}` : ""}`}
          data-testid={`cfg-upload-${path}`}
        />
        <button
          type="button"
          className="wd-pick"
          disabled={!team || busy}
          onClick={() => fileInput.current?.click()}
          title={team ? undefined : "Choose the project first: the directory is uploaded to its team"}
        >
          Upload .zip…
        </button>
        <input
          id={id}
          className="wd-ref"
          value={draft ?? ""}
          placeholder={draft === null ? "unset" : "none: the job runs in an empty directory"}
          onChange={(event) => onDraft(event.target.value)}
          aria-invalid={props.invalid}
          aria-describedby={props.helpId}
          spellCheck={false}
          autoComplete="off"
          data-testid={`cfg-input-${path}`}
        />
        {draft ? (
          <button type="button" className="link-button" onClick={() => onDraft("")} data-testid={`cfg-clear-${path}`}>
            Clear
          </button>
        ) : null}
      </div>
      {upload.state === "uploading" ? (
        <div className="wd-progress" data-testid={`cfg-upload-progress-${path}`}>
          <progress value={upload.progress.loaded} max={upload.progress.total || 1} aria-label={`Uploading ${upload.name}`} />
          <span className="small">
            {upload.name}: {formatBytes(upload.progress.loaded)} of {formatBytes(upload.progress.total)} ({percent}%)
          </span>
          <button type="button" className="link-button" onClick={() => upload.abort.abort()}>
            Cancel
          </button>
        </div>
      ) : upload.state === "done" ? (
        <p className="small wd-done" data-testid={`cfg-upload-done-${path}`}>
          ✓ <code>{upload.name}</code> uploaded to {team?.name ?? "the team"}: {upload.stored.files}{" "}
          {upload.stored.files === 1 ? "file" : "files"}, {formatBytes(upload.stored.size)}
          {upload.stored.created ? "" : " (the team had it already)"}.
        </p>
      ) : upload.state === "failed" ? (
        <p className="field-error" role="alert" data-testid={`cfg-upload-error-${path}`}>
          <code>{upload.name}</code> was not uploaded. {uploadProblem(upload.error)}
        </p>
      ) : null}
      {!team ? <p className="muted small">Choose the project first: the directory is uploaded to its team.</p> : null}
      <p className="muted small wd-how" data-testid={`cfg-workdir-how-${path}`}>
        A .zip of the directory (picked, or dropped here), its files at the top (the job runs in a copy of it; this page does not zip folders).
        Make one with <code>cd my-trainer &amp;&amp; zip -r ../my-trainer.zip . -x &apos;.git/*&apos;</code>, or let{" "}
        <code>barrel submit --command … --working-dir .</code> zip and upload it, leaving out .git, caches and
        .gitignore&apos;d files.
      </p>
    </div>
  );
}
