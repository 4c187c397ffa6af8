import { Navigate, useLocation } from "react-router";

import { mlflowLinkTarget } from "./links";

/** /mlflow/#/experiments/3/runs/9 → /runs/9 (see links.ts). Outside the login layout, so the
 * fragment is read before a login redirect could drop it. */
export function MlflowLinkPage() {
  const { hash } = useLocation();
  return <Navigate to={mlflowLinkTarget(hash)} replace />;
}
