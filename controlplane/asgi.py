import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django_asgi_app = get_asgi_application()

# Imported after Django is set up: consumers import models.
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import path  # noqa: E402

from controlplane.auth_ws import BearerAuthMiddleware  # noqa: E402
from controlplane.runs.consumers import RunConsumer  # noqa: E402

websocket_urlpatterns = [path("ws/runs/<int:run_id>/", RunConsumer.as_asgi())]

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(BearerAuthMiddleware(URLRouter(websocket_urlpatterns))),
    }
)
