from django.apps import AppConfig


class DiagnosticsConfig(AppConfig):
    name = "controlplane.diagnostics"
    label = "diagnostics"

    def ready(self) -> None:
        # Failure triage: a failed attempt is filed under its signature by a task, after commit.
        from controlplane.diagnostics.failures import on_attempt_failed
        from controlplane.runs.lifecycle import attempt_failed

        attempt_failed.connect(on_attempt_failed, dispatch_uid="diagnostics.file_failure")

        # Run diagnosis: a stored metrics batch's diagnosed points are queued for the updater.
        from controlplane.diagnostics.feed import on_points_stored
        from controlplane.metrics.signals import points_stored

        points_stored.connect(on_points_stored, dispatch_uid="diagnostics.feed")

        # Human scores: a stored eval ranking has its runs checked for reward hacking.
        from controlplane.diagnostics.tasks import on_ranking_stored
        from controlplane.evals.signals import ranking_stored

        ranking_stored.connect(on_ranking_stored, dispatch_uid="diagnostics.human_scores")
