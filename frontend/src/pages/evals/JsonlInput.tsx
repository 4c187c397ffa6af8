import { useId, useState } from "react";

import { countLines, lineErrors, lineText } from "./jsonl";

/**
 * JSON Lines typed or loaded from a file, with the server's complaints listed by line beside the
 * text of that line. The text stays as it is after a refusal, so the person fixes the line and
 * sends again.
 */
export function JsonlInput({
  value,
  onChange,
  fields,
  disabled = false,
}: {
  value: string;
  onChange: (text: string) => void;
  /** The server's field errors; those named `jsonl…` are shown here. */
  fields: Record<string, string[]>;
  disabled?: boolean;
}) {
  const id = useId();
  const [fileName, setFileName] = useState<string | null>(null);
  const [readError, setReadError] = useState<string | null>(null);
  const byLine = lineErrors(fields);
  const whole = fields.jsonl;
  const invalid = byLine.size > 0 || (whole?.length ?? 0) > 0;

  return (
    <div className="jsonl-input">
      <div className="jsonl-file">
        <label htmlFor={`${id}-file`}>Load a .jsonl file</label>{" "}
        <input
          id={`${id}-file`}
          type="file"
          accept=".jsonl,.ndjson,.json,.txt,application/jsonl,application/x-ndjson,text/plain"
          disabled={disabled}
          data-testid="jsonl-file"
          onChange={(event) => {
            const file = event.target.files?.[0];
            if (!file) return;
            setReadError(null);
            file.text().then(
              (text) => {
                setFileName(file.name);
                onChange(text);
              },
              () => setReadError(`Cannot read ${file.name}.`),
            );
          }}
        />
        {fileName ? (
          <span className="muted small" data-testid="jsonl-file-name">
            {fileName}: {countLines(value)} prompts
          </span>
        ) : null}
      </div>
      {readError ? <p className="field-error">{readError}</p> : null}
      <label htmlFor={`${id}-text`} className="muted small">
        One JSON object a line: <code>{'{"prompt": "…", "reference": "…", "tags": ["…"]}'}</code>; reference and tags
        are optional.
      </label>
      <textarea
        id={`${id}-text`}
        className={invalid ? "jsonl-text invalid" : "jsonl-text"}
        rows={8}
        spellCheck={false}
        value={value}
        disabled={disabled}
        aria-invalid={invalid}
        data-testid="jsonl-text"
        onChange={(event) => onChange(event.target.value)}
      />
      {whole ? <p className="field-error" role="alert">{whole.join("; ")}</p> : null}
      {byLine.size > 0 ? (
        <div className="line-errors" role="alert" data-testid="jsonl-errors">
          <p>
            {byLine.size === 1 ? "One line is" : `${byLine.size} lines are`} refused, so nothing was imported. Fix{" "}
            {byLine.size === 1 ? "it" : "them"} and send again:
          </p>
          <ul>
            {[...byLine.entries()].map(([line, problems]) => (
              <li key={line} data-testid={`jsonl-error-${line}`}>
                <span className="line-number">line {line}</span> <code className="line-text">{lineText(value, line) || "(empty)"}</code>
                <ul>
                  {[...problems.entries()].map(([field, messages]) => (
                    <li key={field}>{messages.join("; ")}</li>
                  ))}
                </ul>
              </li>
            ))}
          </ul>
        </div>
      ) : null}
    </div>
  );
}
