import type { FailureStatus } from "./api";
import { causeLabel, statusLabel } from "./format";

export function FaultBadge({ fault, cause }: { fault: string; cause: string }) {
  return (
    <span className={`fault fault-${fault}`} data-testid="fault" title={fault === "infra" ? "infra fault" : "workload fault"}>
      {fault} · {causeLabel(fault, cause)}
    </span>
  );
}

export function FixBadge({ status }: { status: FailureStatus }) {
  if (status === "open") return null;
  return (
    <span className={`fix fix-${status}`} data-testid="fix-status">
      {statusLabel(status)}
    </span>
  );
}
