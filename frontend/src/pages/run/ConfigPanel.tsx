import type { RunDetail } from "../../api/types";
import { configPanel } from "./config";

/** The run's config; an external run's MLflow params in its place. */
export function ConfigPanel({ run }: { run: RunDetail }) {
  const { title, value } = configPanel(run);
  return (
    <details className="panel">
      <summary>{title}</summary>
      <pre className="code-block" data-testid="run-config">
        {JSON.stringify(value, null, 2)}
      </pre>
    </details>
  );
}
