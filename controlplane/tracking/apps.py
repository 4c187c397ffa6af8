from django.apps import AppConfig


class TrackingConfig(AppConfig):
    name = "controlplane.tracking"
    label = "tracking"
