/** Pure helpers of the team alert feed: kinds in words, the filters in the query string. */
import type { components } from "../../api/schema.gen";
import type { AlertFilters } from "./api";

/** Every kind the detectors raise (controlplane/diagnostics/alerts.py, KINDS). */
export type AlertKind = components["schemas"]["MutedEnum"];

export const KIND_LABELS: Record<AlertKind, string> = {
  nan_inf: "NaN/Inf in loss or gradients",
  reward_collapse: "reward collapse",
  entropy_collapse: "entropy collapse",
  kl_spike: "KL spike",
  engine_mismatch: "engine mismatch",
  sandbox_failures: "sandbox failure spike",
  no_signal: "no learning signal",
  length_outpaces_reward: "length outpacing reward",
  reward_hacking: "reward hacking (held-out eval falling)",
  human_reward_hacking: "reward hacking (people's scores falling)",
  stalled: "stalled run",
};

export const KINDS = Object.keys(KIND_LABELS) as AlertKind[];

function isKind(kind: string): kind is AlertKind {
  return Object.hasOwn(KIND_LABELS, kind);
}

/** A kind in words; one this page does not know yet as its name with spaces. */
export function kindLabel(kind: string): string {
  return isKind(kind) ? KIND_LABELS[kind] : kind.replaceAll("_", " ");
}

/** The filters of `?state=open|acknowledged&kind=…`; anything else is "all". */
export function filtersFrom(params: URLSearchParams): AlertFilters {
  const state = params.get("state");
  const kind = params.get("kind") ?? "";
  return {
    state: state === "open" || state === "acknowledged" ? state : "",
    kind: isKind(kind) ? kind : "",
  };
}
