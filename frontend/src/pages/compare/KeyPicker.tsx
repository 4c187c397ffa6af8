import { useState } from "react";

import { groupByNamespace } from "../run/charts";
import { orderKeys } from "./keys";

interface KeyPickerProps {
  /** Every key of the runs, with how many runs have it. */
  counts: ReadonlyMap<string, number>;
  runCount: number;
  chosen: readonly string[];
  /** Whether `chosen` is the default (nothing picked yet). */
  isDefault: boolean;
  /** New keys, or null for the default. */
  onChange: (keys: string[] | null) => void;
}

/** Which metrics are charted: a searchable list of every key the runs have, by namespace. */
export function KeyPicker({ counts, runCount, chosen, isDefault, onChange }: KeyPickerProps) {
  const [search, setSearch] = useState("");
  const needle = search.trim().toLowerCase();
  const all = [...counts.keys()];
  const groups = groupByNamespace(needle ? all.filter((key) => key.toLowerCase().includes(needle)) : all);
  const chosenSet = new Set(chosen);
  const toggle = (key: string) => {
    const next = chosenSet.has(key) ? chosen.filter((k) => k !== key) : [...chosen, key];
    onChange(orderKeys(next));
  };
  return (
    <details className="panel key-picker" data-testid="key-picker">
      <summary>
        Metrics: {chosen.length} charted of {counts.size}
        {isDefault ? <span className="muted small"> (the keys every run has)</span> : null}
      </summary>
      <div className="key-picker-bar">
        <input
          type="search"
          placeholder="search keys…"
          aria-label="Search metric keys"
          value={search}
          onChange={(e) => setSearch(e.target.value)}
          data-testid="key-search"
        />
        {needle ? (
          <button
            type="button"
            onClick={() => onChange(orderKeys(new Set([...chosen, ...groups.flatMap((g) => g.keys)])))}
          >
            chart all {groups.reduce((n, g) => n + g.keys.length, 0)} matches
          </button>
        ) : null}
        <button type="button" onClick={() => onChange(null)} disabled={isDefault}>
          default
        </button>
        <button type="button" onClick={() => onChange([])} disabled={chosen.length === 0}>
          none
        </button>
      </div>
      <div className="key-picker-list">
        {groups.map((group) => (
          <fieldset key={group.namespace}>
            <legend>{group.namespace}</legend>
            {group.keys.map((key) => {
              const n = counts.get(key) ?? 0;
              return (
                <label key={key} className="key-option">
                  <input type="checkbox" checked={chosenSet.has(key)} onChange={() => toggle(key)} />{" "}
                  <code>{key}</code>
                  {n < runCount ? (
                    <span className="muted small">
                      {" "}
                      ({n} of {runCount} runs)
                    </span>
                  ) : null}
                </label>
              );
            })}
          </fieldset>
        ))}
        {groups.length === 0 ? <p className="muted small">No key matches “{search}”.</p> : null}
      </div>
    </details>
  );
}
