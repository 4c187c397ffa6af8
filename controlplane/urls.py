from django.http import HttpRequest, JsonResponse
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from controlplane import frontend
from controlplane.artifacts.api import RunArtifactDownloadView, RunArtifactsView
from controlplane.checkpoints.api import CheckpointListView, RunCheckpointsView, RunSamplesView
from controlplane.metrics.api import MetricKeysView, MetricsQueryView, MetricsView
from controlplane.observability import metrics_view
from controlplane.runs.api import (
    RecipeListView,
    RunCancelView,
    RunCloneView,
    RunDetailView,
    RunEnvironmentView,
    RunListView,
    RunResumeView,
)
from controlplane.teams.api import (
    MemberDetailView,
    MemberListView,
    ProjectListView,
    SessionView,
    TeamListView,
    TokenDetailView,
    TokenListView,
)


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


api_v1 = [
    path("session", SessionView.as_view()),
    path("tokens", TokenListView.as_view()),
    path("tokens/<int:token_id>", TokenDetailView.as_view()),
    path("teams", TeamListView.as_view()),
    path("teams/<int:team_id>/members", MemberListView.as_view()),
    path("teams/<int:team_id>/members/<int:user_id>", MemberDetailView.as_view()),
    path("projects", ProjectListView.as_view()),
    path("recipes", RecipeListView.as_view()),
    path("runs", RunListView.as_view()),
    path("runs/<int:run_id>", RunDetailView.as_view()),
    path("runs/<int:run_id>/cancel", RunCancelView.as_view()),
    path("runs/<int:run_id>/clone", RunCloneView.as_view()),
    path("runs/<int:run_id>/resume", RunResumeView.as_view()),
    path("runs/<int:run_id>/environment", RunEnvironmentView.as_view()),
    path("runs/<int:run_id>/metrics", MetricsView.as_view()),
    path("runs/<int:run_id>/metrics/keys", MetricKeysView.as_view()),
    path("metrics/query", MetricsQueryView.as_view()),
    path("runs/<int:run_id>/samples", RunSamplesView.as_view()),
    path("runs/<int:run_id>/checkpoints", RunCheckpointsView.as_view()),
    path("runs/<int:run_id>/artifacts", RunArtifactsView.as_view()),
    path("runs/<int:run_id>/artifacts/download", RunArtifactDownloadView.as_view()),
    path("checkpoints", CheckpointListView.as_view()),
]

urlpatterns = [
    path("healthz", healthz),
    path("metrics", metrics_view),
    path("api/v1/", include(api_v1)),
    path("mlflow/", include("controlplane.tracking.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    re_path(r"^assets/(?P<path>.+)$", frontend.assets),
    re_path(r"^(?!api/|ws/|mlflow/|assets/)(?P<path>.*)$", frontend.index),
]
