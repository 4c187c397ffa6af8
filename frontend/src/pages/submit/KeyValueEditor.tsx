/**
 * A map field's editor (a `dict[str, str]` such as a command run's env): one row per name and
 * value, rows added and removed, and `NAME=value` lines pasted into a name split into rows, as a
 * `.env` file reads. What a name may be is the server's to say: its 400 shows under the editor.
 */
import type { ClipboardEvent } from "react";

import type { MapRow } from "./schemaForm";

export interface KeyValueEditorProps {
  /** The first name input's id (a label points at it). */
  id: string;
  rows: MapRow[];
  onRows: (rows: MapRow[]) => void;
  invalid: boolean;
  helpId: string;
  /** data-testid prefix: `${testId}-name-0`, `${testId}-value-0`, `${testId}-remove-0`, `${testId}-add`. */
  testId: string;
  namePlaceholder?: string;
  valuePlaceholder?: string;
}

/** `NAME=value` lines (a .env file's, `export` and quotes allowed) as rows; null when the text has none. */
export function rowsFromText(text: string): MapRow[] | null {
  const lines = text.split(/\r?\n/).filter((line) => line.trim() !== "" && !line.trim().startsWith("#"));
  if (lines.length === 0 || !lines.every((line) => line.includes("="))) return null;
  return lines.map((line): MapRow => {
    const at = line.indexOf("=");
    const name = line.slice(0, at).trim().replace(/^export\s+/, "");
    let value = line.slice(at + 1).trim();
    if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.endsWith(value[0])) value = value.slice(1, -1);
    return [name, value];
  });
}

export function KeyValueEditor(props: KeyValueEditorProps) {
  const { rows, onRows, testId } = props;
  // An empty map shows one blank row to type into; it becomes a row when typed in.
  const shown: MapRow[] = rows.length > 0 ? rows : [["", ""]];
  const set = (index: number, row: MapRow) => onRows(shown.map((old, i) => (i === index ? row : old)));
  const remove = (index: number) => onRows(shown.filter((_, i) => i !== index));
  const add = () => {
    onRows([...shown, ["", ""]]);
    // Focus the new row's name once drawn.
    setTimeout(() => document.getElementById(`${props.id}-name-${shown.length}`)?.focus(), 0);
  };
  const onPaste = (index: number) => (event: ClipboardEvent<HTMLInputElement>) => {
    // A name has no "=": text with one is NAME=value lines, each made a row.
    const pasted = rowsFromText(event.clipboardData.getData("text"));
    if (!pasted) return;
    event.preventDefault();
    onRows([...shown.slice(0, index), ...pasted, ...shown.slice(index + 1)]);
  };
  return (
    <div className="kv-editor" role="group" aria-describedby={props.helpId} data-testid={testId}>
      {shown.map(([name, value], index) => (
        <div className="kv-row" key={index} data-testid={`${testId}-row`}>
          <input
            id={index === 0 ? props.id : `${props.id}-name-${index}`}
            className="kv-name"
            value={name}
            placeholder={props.namePlaceholder ?? "NAME"}
            aria-label={`name ${index + 1}`}
            aria-invalid={props.invalid}
            onChange={(event) => set(index, [event.target.value, value])}
            onPaste={onPaste(index)}
            spellCheck={false}
            autoComplete="off"
            data-testid={`${testId}-name-${index}`}
          />
          <span aria-hidden="true" className="muted">
            =
          </span>
          <input
            className="kv-value"
            value={value}
            placeholder={props.valuePlaceholder ?? "value"}
            aria-label={`value ${index + 1}${name ? ` (${name})` : ""}`}
            onChange={(event) => set(index, [name, event.target.value])}
            spellCheck={false}
            autoComplete="off"
            data-testid={`${testId}-value-${index}`}
          />
          <button
            type="button"
            className="link-button kv-remove"
            onClick={() => remove(index)}
            disabled={rows.length === 0}
            aria-label={`remove ${name || `row ${index + 1}`}`}
            title="Remove"
            data-testid={`${testId}-remove-${index}`}
          >
            ×
          </button>
        </div>
      ))}
      <button type="button" className="link-button kv-add" onClick={add} data-testid={`${testId}-add`}>
        + Add variable
      </button>
    </div>
  );
}
