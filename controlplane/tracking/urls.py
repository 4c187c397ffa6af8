"""Routes of the MLflow tracking subset, included at /mlflow/ (the mlflow client appends
/api/2.0/mlflow/<endpoint> to MLFLOW_TRACKING_URI, which is <barrel>/mlflow, and resolves
mlflow-artifacts: URIs to /api/2.0/mlflow-artifacts/artifacts under it)."""

from django.urls import include, path, re_path

from controlplane.tracking import api, artifacts, links

endpoints = [
    path("experiments/create", api.ExperimentCreateView.as_view()),
    path("experiments/get", api.ExperimentGetView.as_view()),
    path("experiments/get-by-name", api.ExperimentGetByNameView.as_view()),
    path("experiments/search", api.ExperimentSearchView.as_view()),
    path("runs/create", api.RunCreateView.as_view()),
    path("runs/get", api.RunGetView.as_view()),
    path("runs/update", api.RunUpdateView.as_view()),
    path("runs/search", api.RunSearchView.as_view()),
    path("runs/delete", api.RunDeleteView.as_view()),
    path("runs/restore", api.RunRestoreView.as_view()),
    path("runs/log-batch", api.LogBatchView.as_view()),
    path("runs/log-metric", api.LogMetricView.as_view()),
    path("runs/log-parameter", api.LogParameterView.as_view()),
    path("runs/set-tag", api.SetTagView.as_view()),
    path("metrics/get-history", api.MetricHistoryView.as_view()),
    path("logged-models/search", api.LoggedModelSearchView.as_view()),
]

artifact_endpoints = [
    path("artifacts", artifacts.ArtifactListView.as_view()),
    path("artifacts/<path:artifact_path>", artifacts.ArtifactView.as_view()),
    re_path(r"^mpu/(?:create|complete|abort)/(?P<artifact_path>.*)$", artifacts.MultipartUploadView.as_view()),
]

urlpatterns = [
    # The run and experiment links the mlflow client prints (<tracking URI>/#/experiments/...).
    path("", links.mlflow_ui),
    path("api/2.0/mlflow/", include(endpoints)),
    path("api/2.0/mlflow-artifacts/", include(artifact_endpoints)),
    # Everything else under /mlflow/, any method: MLflow's JSON ENDPOINT_NOT_FOUND.
    re_path(r"^(?P<path>.*)$", api.EndpointNotFoundView.as_view()),
]
