from django.apps import AppConfig


class DiagnosticsConfig(AppConfig):
    name = "controlplane.diagnostics"
    label = "diagnostics"
