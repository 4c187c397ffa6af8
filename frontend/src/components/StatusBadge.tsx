import type { RunStatus } from "../api/types";

interface StatusBadgeProps {
  status: RunStatus | string;
  testId?: string;
}

/** Coloured run status; colours live in styles.css under .status-<name>. */
export function StatusBadge({ status, testId }: StatusBadgeProps) {
  return (
    <span className={`status status-${status.toLowerCase()}`} data-testid={testId} data-status={status}>
      {status}
    </span>
  );
}
