from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "controlplane.evals"
    label = "evals"

    def ready(self) -> None:
        from controlplane.evals.signals import eval_opened
        from controlplane.evals.tasks import on_eval_opened

        eval_opened.connect(on_eval_opened, dispatch_uid="evals.battles_prepare_first")
