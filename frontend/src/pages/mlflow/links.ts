/**
 * Where the links the mlflow client prints lead. They point into MLflow's own UI with a
 * fragment, `<tracking URI>/#/experiments/3/runs/9` and `<tracking URI>/#/experiments/3`
 * (the tracking URI is Barrel's /mlflow); the server answers /mlflow/ with this app, and this
 * turns the fragment into the dashboard's page for it.
 */
const RUN = /^#\/experiments\/(\d+)\/runs\/(\d+)(?:[/?].*)?$/;
const EXPERIMENT = /^#\/experiments\/(\d+)(?:[/?].*)?$/;

export function mlflowLinkTarget(hash: string): string {
  const run = RUN.exec(hash);
  if (run) return `/runs/${run[2]}`;
  const experiment = EXPERIMENT.exec(hash);
  // An experiment is a project: its runs.
  if (experiment) return `/?project=${experiment[1]}`;
  return "/";
}
