import { useEffect, useState } from "react";

import { ErrorBox } from "../../components/ErrorBox";
import { StatusBadge } from "../../components/StatusBadge";
import { TableState } from "../../components/TableState";
import { formatDateTime } from "../../format";
import { PICK_LIMIT, usePickableRuns } from "./api";

/** Runs to compare, picked from the newest ones (search by name); the order picked is the order shown. */
export function RunPicker({ initial, onPick, action }: { initial: readonly number[]; onPick: (ids: number[]) => void; action: string }) {
  const [input, setInput] = useState("");
  const [name, setName] = useState("");
  const [picked, setPicked] = useState<number[]>([...initial]);
  const runs = usePickableRuns(name);

  useEffect(() => {
    const timer = window.setTimeout(() => setName(input.trim()), 300);
    return () => window.clearTimeout(timer);
  }, [input]);

  const results = runs.data?.results ?? [];
  const toggle = (id: number) => setPicked((old) => (old.includes(id) ? old.filter((x) => x !== id) : [...old, id]));
  return (
    <div className="run-picker" data-testid="run-picker">
      <div className="filters">
        <label>
          Name{" "}
          <input
            type="search"
            placeholder="contains…"
            value={input}
            onChange={(e) => setInput(e.target.value)}
            data-testid="pick-name"
          />
        </label>
        <button type="button" className="primary" disabled={picked.length === 0} onClick={() => onPick(picked)} data-testid="pick-submit">
          {action} ({picked.length})
        </button>
        {picked.length > 0 ? (
          <button type="button" className="link-button" onClick={() => setPicked([])}>
            clear
          </button>
        ) : null}
        {runs.isFetching ? <span className="muted small">updating…</span> : null}
      </div>
      {runs.isError ? <ErrorBox error={runs.error} title="Cannot load runs" /> : null}
      <div className="table-scroll">
        <table className="table">
          <thead>
            <tr>
              <th />
              <th className="num">id</th>
              <th>name</th>
              <th>status</th>
              <th>created</th>
            </tr>
          </thead>
          <tbody>
            {results.map((run) => (
              <tr key={run.id}>
                <td>
                  <input
                    type="checkbox"
                    checked={picked.includes(run.id)}
                    onChange={() => toggle(run.id)}
                    aria-label={`Compare run ${run.id} ${run.name}`}
                  />
                </td>
                <td className="num">{run.id}</td>
                <td className="wrap">{run.name}</td>
                <td>
                  <StatusBadge status={run.status} />
                </td>
                <td className="muted">{formatDateTime(run.created_at)}</td>
              </tr>
            ))}
            <TableState
              pending={runs.isPending}
              isEmpty={runs.isSuccess && results.length === 0}
              empty={name ? `No run's name contains “${name}”.` : "No runs yet."}
              columns={5}
            />
          </tbody>
        </table>
      </div>
      {runs.data && runs.data.count > PICK_LIMIT ? (
        <p className="muted small">
          The newest {PICK_LIMIT} of {runs.data.count} runs; search by name for others.
        </p>
      ) : null}
    </div>
  );
}
