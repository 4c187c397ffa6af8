import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Link } from "react-router";

import { apiRequest } from "../../api/client";
import type { components } from "../../api/schema.gen";
import { ErrorBox } from "../../components/ErrorBox";

export type Alert = components["schemas"]["Alert"];
type AlertPage = components["schemas"]["PaginatedAlertList"];

export const alertKeys = {
  run: (runId: number) => ["run", runId, "alerts"] as const,
};

/** "steps 100–160", "step 30", or "" for an alert that names no step (a stalled run). */
export function alertSteps(alert: Pick<Alert, "first_step" | "last_step">): string {
  if (alert.first_step === null || alert.first_step === undefined) return "";
  if (alert.last_step === null || alert.last_step === undefined || alert.last_step === alert.first_step) {
    return `step ${alert.first_step}`;
  }
  return `steps ${alert.first_step}–${alert.last_step}`;
}

export function useRunAlerts(runId: number) {
  return useQuery({
    queryKey: alertKeys.run(runId),
    queryFn: ({ signal }) => apiRequest<AlertPage>(`/runs/${runId}/alerts`, { query: { limit: 100 }, signal }),
  });
}

/** The run's alerts, newest first, each naming its steps; a member acknowledges one. Refetched
 * when the server pushes alert.raised. */
export function AlertsPanel({ runId }: { runId: number }) {
  const alerts = useRunAlerts(runId);
  const queryClient = useQueryClient();
  const acknowledge = useMutation({
    mutationFn: (id: number) => apiRequest<Alert>(`/alerts/${id}/acknowledge`, { method: "POST" }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: alertKeys.run(runId) }),
  });
  const open = alerts.data?.results.filter((a) => !a.acknowledged_at).length ?? 0;
  return (
    <details className="panel" open={(alerts.data?.count ?? 0) > 0} data-testid="alerts">
      <summary>
        Alerts{" "}
        {alerts.data ? (
          <span className={open ? "badge badge-warning" : "muted"}>
            {open ? `${open} open` : `${alerts.data.count} in all`}
          </span>
        ) : null}
      </summary>
      {alerts.isPending ? (
        <p className="muted">Loading alerts…</p>
      ) : alerts.isError ? (
        <ErrorBox error={alerts.error} title="Cannot load the alerts" />
      ) : alerts.data.results.length === 0 ? (
        <p className="muted" data-testid="alerts-empty">
          No alerts: nothing in this run's metrics matches a known failure pattern.
        </p>
      ) : (
        <ul className="alerts" aria-label="Alerts">
          {alerts.data.results.map((a) => (
            <li key={a.id} className={`alert alert-${a.severity}`} data-testid="alert">
              <strong>{a.kind.replaceAll("_", " ")}</strong>{" "}
              {alertSteps(a) ? <Link to={`/runs/${runId}?step=${a.first_step}`}>{alertSteps(a)}</Link> : null}{" "}
              <span className="muted">{new Date(a.created_at).toLocaleString()}</span>
              <p>{a.message}</p>
              {a.acknowledged_at ? (
                <span className="muted">acknowledged by {a.acknowledged_by ?? "someone"}</span>
              ) : (
                <button
                  type="button"
                  disabled={acknowledge.isPending}
                  onClick={() => acknowledge.mutate(a.id)}
                  aria-label={`Acknowledge ${a.kind}`}
                >
                  Acknowledge
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      {acknowledge.isError ? <ErrorBox error={acknowledge.error} title="Cannot acknowledge" /> : null}
    </details>
  );
}
