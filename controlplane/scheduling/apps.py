from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "controlplane.scheduling"
    label = "scheduling"

    def ready(self) -> None:
        # A queued attempt, and an attempt that ended (its reservation freed), start a pass.
        from controlplane.runs.lifecycle import attempt_ended, attempt_queued
        from controlplane.scheduling.tasks import on_queue_changed

        attempt_queued.connect(on_queue_changed, dispatch_uid="scheduling.queued")
        attempt_ended.connect(on_queue_changed, dispatch_uid="scheduling.ended")
