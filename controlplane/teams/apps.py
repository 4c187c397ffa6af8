from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "controlplane.teams"
    label = "teams"

    def ready(self) -> None:
        from controlplane import schema  # noqa: F401 - registers the OpenAPI extensions
        from controlplane.teams import secrets  # noqa: F401 - registers the checks of BARREL_SECRETS_KEYS
