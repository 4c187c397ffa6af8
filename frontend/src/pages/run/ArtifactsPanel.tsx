import { useState } from "react";

import { artifactUrl } from "../../api/client";
import { useArtifacts, useArtifactText } from "../../api/hooks";
import type { ArtifactEntry } from "../../api/types";
import { ErrorBox } from "../../components/ErrorBox";
import { artifactView, breadcrumbs, formatBytes, prettyJson } from "./artifacts";

/** The files a run logged (mlflow.log_artifact, log_dict, log_text...), a directory at a time;
 * a chosen file is shown below the list: text and JSON inline, images as images. */
export function ArtifactsPanel({ runId }: { runId: number }) {
  const [dir, setDir] = useState("");
  const [chosen, setChosen] = useState<ArtifactEntry | null>(null);
  const listing = useArtifacts(runId, dir);
  if (listing.isPending) return null;
  if (listing.isError) return <ErrorBox error={listing.error} title="Cannot load artifacts" />;
  // Nothing logged at all: no panel, as for samples and checkpoints.
  if (dir === "" && listing.data.files.length === 0) return null;

  const open = (path: string) => {
    setDir(path);
    setChosen(null);
  };
  return (
    <details className="panel" open data-testid="artifacts">
      <summary>Artifacts</summary>
      <p className="artifact-crumbs">
        <button type="button" className="link-button" onClick={() => open("")}>
          artifacts
        </button>
        {breadcrumbs(dir).map((crumb) => (
          <span key={crumb.path}>
            {" / "}
            <button type="button" className="link-button" onClick={() => open(crumb.path)}>
              {crumb.name}
            </button>
          </span>
        ))}
      </p>
      <table className="table">
        <thead>
          <tr>
            <th>name</th>
            <th className="num">size</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {listing.data.files.map((entry) => (
            <tr key={entry.path} className={chosen?.path === entry.path ? "chosen" : undefined}>
              <td>
                <button
                  type="button"
                  className="link-button"
                  onClick={() => (entry.is_dir ? open(entry.path) : setChosen(entry))}
                >
                  {entry.is_dir ? `${entry.name}/` : entry.name}
                </button>
              </td>
              <td className="num">{entry.is_dir ? "" : formatBytes(entry.size)}</td>
              <td>{entry.is_dir ? null : <a href={artifactUrl(runId, entry.path)}>download</a>}</td>
            </tr>
          ))}
          {listing.data.files.length === 0 ? (
            <tr>
              <td colSpan={3} className="empty">
                Nothing here.
              </td>
            </tr>
          ) : null}
        </tbody>
      </table>
      {listing.data.truncated ? (
        <p className="muted small">Only the first {listing.data.files.length} entries are listed.</p>
      ) : null}
      {chosen ? <ArtifactPreview runId={runId} entry={chosen} /> : null}
    </details>
  );
}

function ArtifactPreview({ runId, entry }: { runId: number; entry: ArtifactEntry }) {
  const view = artifactView(entry.name, entry.size);
  const inlineText = view === "json" || view === "text";
  const text = useArtifactText(runId, entry.path, entry.size, inlineText);
  const url = artifactUrl(runId, entry.path);
  let body;
  if (view === "image") {
    body = <img className="artifact-image" src={url} alt={entry.path} />;
  } else if (!inlineText) {
    body = (
      <p className="muted">
        Not shown here ({formatBytes(entry.size)}): <a href={url}>download {entry.name}</a>.
      </p>
    );
  } else if (text.isPending) {
    body = <p className="muted">Loading…</p>;
  } else if (text.isError) {
    body = <ErrorBox error={text.error} title={`Cannot load ${entry.name}`} />;
  } else {
    const shown = view === "json" ? prettyJson(text.data).text : text.data;
    body = <pre className="code-block">{shown}</pre>;
  }
  return (
    <section className="artifact-preview" data-testid="artifact-preview">
      <h3>
        <code>{entry.path}</code>
      </h3>
      {body}
    </section>
  );
}
