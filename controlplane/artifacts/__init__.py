"""Run artifacts: the files a run logs (generations, configs, plots), on Django's storage API.

They are stored under `runs/<run id>/<path>` in the storage named "artifacts" in
settings.STORAGES: a local directory by default, an S3-compatible bucket where configured. Two
APIs serve them: MLflow's artifact proxy (controlplane.tracking.artifacts, which the mlflow
client's `log_artifact` and `download_artifacts` use) and Barrel's own
`/api/v1/runs/{id}/artifacts` (controlplane.artifacts.api, which the dashboard uses). An
artifact belongs to its run: whoever may see the run reads it; members and admins of its team,
and the run's own run token, write it.
"""
