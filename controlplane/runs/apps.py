from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "controlplane.runs"
    label = "runs"
