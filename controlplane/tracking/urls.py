"""Routes of the MLflow tracking subset, included at /mlflow/ (the mlflow client appends
/api/2.0/mlflow/<endpoint> to MLFLOW_TRACKING_URI, which is <barrel>/mlflow)."""

from django.urls import include, path, re_path

from controlplane.tracking import api

endpoints = [
    path("experiments/create", api.ExperimentCreateView.as_view()),
    path("experiments/get", api.ExperimentGetView.as_view()),
    path("experiments/get-by-name", api.ExperimentGetByNameView.as_view()),
    path("runs/create", api.RunCreateView.as_view()),
    path("runs/get", api.RunGetView.as_view()),
    path("runs/update", api.RunUpdateView.as_view()),
    path("runs/search", api.RunSearchView.as_view()),
    path("runs/log-batch", api.LogBatchView.as_view()),
    path("runs/log-metric", api.LogMetricView.as_view()),
    path("runs/log-parameter", api.LogParameterView.as_view()),
    path("runs/set-tag", api.SetTagView.as_view()),
    path("metrics/get-history", api.MetricHistoryView.as_view()),
]

urlpatterns = [
    path("api/2.0/mlflow/", include(endpoints)),
    re_path(r"^(?P<path>.*)$", api.endpoint_not_found),
]
