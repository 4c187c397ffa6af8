from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "controlplane.evals"
    label = "evals"
