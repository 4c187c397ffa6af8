from django.http import HttpRequest, JsonResponse
from django.urls import include, path, re_path, register_converter
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from controlplane import frontend
from controlplane.artifacts.api import RunArtifactDownloadView, RunArtifactsView
from controlplane.chat.api import (
    ChatDetailView,
    ChatListView,
    ChatMessagesView,
    RunChatDoneView,
    RunChatNextView,
    RunChatTokensView,
)
from controlplane.checkpoints.api import CheckpointListView, RunResumeView, RunSamplesSummaryView, RunSamplesView
from controlplane.compare.api import CompareRunsView, CompareStatsView, GroupExportView, RunTableKeysView, RunTableView
from controlplane.diagnostics.alerts_api import (
    AlertAcknowledgeView,
    ProjectDiagnosticsSettingsView,
    RunAlertsView,
    TeamAlertsView,
)
from controlplane.diagnostics.api import GroupScorecardView, RunDiagnosisView
from controlplane.diagnostics.triage_api import (
    FailureSignatureFixView,
    FailureSignatureView,
    TeamFailuresView,
    TeamFixedPerWeekView,
)
from controlplane.evals.api import (
    BattleDetailView,
    BattleNextView,
    BattleVoteView,
    EvalCloseView,
    EvalDetailView,
    EvalGenerationsView,
    EvalListView,
    EvalRankingView,
    EvalSetDetailView,
    EvalSetImportView,
    EvalSetListView,
    RunCheckpointsWithScoresView,
    RunGenerationsView,
    RunHumanEvalView,
)
from controlplane.limits import MAX_BIGINT
from controlplane.metrics.api import MetricKeysView, MetricsQueryView, MetricsView
from controlplane.observability.collectors import metrics_view
from controlplane.runs.api import (
    GroupDetailView,
    GroupListView,
    GroupRunsView,
    RecipeListView,
    RunCancelView,
    RunCloneView,
    RunControlView,
    RunDetailView,
    RunEnvironmentView,
    RunFinishView,
    RunListView,
    RunPreemptedView,
    SweepView,
)
from controlplane.runs.working_dirs_api import TeamWorkingDirsView
from controlplane.scheduling.api import QueueView, TeamAdmissionsView, TeamPreemptionsView, TeamQuotaView
from controlplane.teams.api import (
    MemberDetailView,
    MemberListView,
    ProjectListView,
    SessionView,
    TeamDetailView,
    TeamListView,
    TokenDetailView,
    TokenListView,
)
from controlplane.teams.secrets_api import TeamSecretDetailView, TeamSecretsView


class IdConverter:
    """A primary key in a path: digits that fit a bigint. A longer number names nothing, so the
    URL does not match (404) instead of reaching the database with an out-of-range value."""

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > MAX_BIGINT:
            raise ValueError(value)
        return number

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(IdConverter, "id")


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


api_v1 = [
    path("session", SessionView.as_view()),
    path("tokens", TokenListView.as_view()),
    path("tokens/<id:token_id>", TokenDetailView.as_view()),
    path("teams", TeamListView.as_view()),
    path("teams/<id:team_id>", TeamDetailView.as_view()),
    path("teams/<id:team_id>/members", MemberListView.as_view()),
    path("teams/<id:team_id>/members/<id:user_id>", MemberDetailView.as_view()),
    path("teams/<id:team_id>/working-dirs", TeamWorkingDirsView.as_view()),
    path("teams/<id:team_id>/secrets", TeamSecretsView.as_view()),
    path("teams/<id:team_id>/secrets/<str:name>", TeamSecretDetailView.as_view()),
    path("projects", ProjectListView.as_view()),
    path("recipes", RecipeListView.as_view()),
    path("runs", RunListView.as_view()),
    path("runs/table", RunTableView.as_view()),
    path("runs/table/keys", RunTableKeysView.as_view()),
    path("runs/<id:run_id>", RunDetailView.as_view()),
    path("sweeps", SweepView.as_view()),
    path("groups", GroupListView.as_view()),
    path("groups/<id:group_id>", GroupDetailView.as_view()),
    path("groups/<id:group_id>/export", GroupExportView.as_view()),
    path("groups/<id:group_id>/runs", GroupRunsView.as_view()),
    path("runs/<id:run_id>/cancel", RunCancelView.as_view()),
    path("runs/<id:run_id>/clone", RunCloneView.as_view()),
    path("runs/<id:run_id>/finish", RunFinishView.as_view()),
    path("runs/<id:run_id>/resume", RunResumeView.as_view()),
    path("runs/<id:run_id>/environment", RunEnvironmentView.as_view()),
    path("runs/<id:run_id>/control", RunControlView.as_view()),
    path("runs/<id:run_id>/preempted", RunPreemptedView.as_view()),
    # POST with `Authorization: Bearer` and a JSON body is served before Django, by the ASGI route
    # controlplane.metrics.ingest_route.IngestRoute (wrapped around Django in asgi.py): metric
    # batches are the hottest request there is, and skip DRF's per-request cost there, with the
    # same checks and answers. Everything else on this path (GET, a session cookie, another
    # content type, any server that is not asgi.py) reaches MetricsView here.
    path("runs/<id:run_id>/metrics", MetricsView.as_view()),
    path("runs/<id:run_id>/metrics/keys", MetricKeysView.as_view()),
    path("metrics/query", MetricsQueryView.as_view()),
    path("compare/stats", CompareStatsView.as_view()),
    path("compare/runs", CompareRunsView.as_view()),
    path("runs/<id:run_id>/samples", RunSamplesView.as_view()),
    path("runs/<id:run_id>/samples/summary", RunSamplesSummaryView.as_view()),
    path("runs/<id:run_id>/checkpoints", RunCheckpointsWithScoresView.as_view()),
    path("runs/<id:run_id>/human-eval", RunHumanEvalView.as_view()),
    path("runs/<id:run_id>/artifacts", RunArtifactsView.as_view()),
    path("runs/<id:run_id>/artifacts/download", RunArtifactDownloadView.as_view()),
    path("checkpoints", CheckpointListView.as_view()),
    path("runs/<id:run_id>/generations", RunGenerationsView.as_view()),
    path("eval-sets", EvalSetListView.as_view()),
    path("eval-sets/<id:set_id>", EvalSetDetailView.as_view()),
    path("eval-sets/<id:set_id>/import", EvalSetImportView.as_view()),
    path("evals", EvalListView.as_view()),
    path("evals/<id:eval_id>", EvalDetailView.as_view()),
    path("evals/<id:eval_id>/close", EvalCloseView.as_view()),
    path("evals/<id:eval_id>/battles/next", BattleNextView.as_view()),
    path("evals/<id:eval_id>/ranking", EvalRankingView.as_view()),
    path("evals/<id:eval_id>/generations", EvalGenerationsView.as_view()),
    path("battles/<uuid:battle_id>", BattleDetailView.as_view()),
    path("battles/<uuid:battle_id>/votes", BattleVoteView.as_view()),
    path("chats", ChatListView.as_view()),
    path("chats/<id:session_id>", ChatDetailView.as_view()),
    path("chats/<id:session_id>/messages", ChatMessagesView.as_view()),
    path("runs/<id:run_id>/chat/next", RunChatNextView.as_view()),
    path("runs/<id:run_id>/chat/<id:message_id>/tokens", RunChatTokensView.as_view()),
    path("runs/<id:run_id>/chat/<id:message_id>/done", RunChatDoneView.as_view()),
    # Failure triage (controlplane.diagnostics.triage_api).
    path("teams/<id:team_id>/failures", TeamFailuresView.as_view()),
    path("teams/<id:team_id>/failures/fixed-per-week", TeamFixedPerWeekView.as_view()),
    path("failures/<id:signature_id>", FailureSignatureView.as_view()),
    path("failures/<id:signature_id>/fix", FailureSignatureFixView.as_view()),
    # Run diagnosis (controlplane.diagnostics.api).
    path("runs/<id:run_id>/diagnosis", RunDiagnosisView.as_view()),
    path("groups/<id:group_id>/scorecard", GroupScorecardView.as_view()),
    # Alerts (controlplane.diagnostics.alerts_api).
    path("runs/<id:run_id>/alerts", RunAlertsView.as_view()),
    path("teams/<id:team_id>/alerts", TeamAlertsView.as_view()),
    path("alerts/<id:alert_id>/acknowledge", AlertAcknowledgeView.as_view()),
    path("projects/<id:project_id>/diagnostics-settings", ProjectDiagnosticsSettingsView.as_view()),
    # Scheduling (controlplane.scheduling.api).
    path("queue", QueueView.as_view()),
    path("teams/<id:team_id>/quota", TeamQuotaView.as_view()),
    path("teams/<id:team_id>/admissions", TeamAdmissionsView.as_view()),
    path("teams/<id:team_id>/preemptions", TeamPreemptionsView.as_view()),
]

urlpatterns = [
    path("healthz", healthz),
    path("metrics", metrics_view),
    path("api/v1/", include(api_v1)),
    path("mlflow/", include("controlplane.tracking.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    re_path(r"^assets/(?P<path>.+)$", frontend.assets),
    re_path(r"^static/(?P<path>.+)$", frontend.static),
    re_path(r"^(?!api/|ws/|mlflow/|assets/|static/)(?P<path>.*)$", frontend.index),
]

# Every error body is JSON, Django's own included (controlplane.error_views.error_response).
handler400 = "controlplane.error_views.bad_request"
handler403 = "controlplane.error_views.permission_denied"
handler404 = "controlplane.error_views.page_not_found"
handler500 = "controlplane.error_views.server_error"
