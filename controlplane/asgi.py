import gc
import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django_asgi_app = get_asgi_application()

# Imported after Django is set up: consumers import models.
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import OriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.urls import get_resolver, path  # noqa: E402

from controlplane.artifacts.asgi import UploadLimit  # noqa: E402
from controlplane.auth.websocket import BearerAuthMiddleware  # noqa: E402
from controlplane.chat.consumers import ChatConsumer  # noqa: E402
from controlplane.evals.consumers import EvalConsumer  # noqa: E402
from controlplane.evals.next_route import NextRoute  # noqa: E402
from controlplane.metrics.ingest_route import IngestRoute  # noqa: E402
from controlplane.runs.consumers import RunConsumer  # noqa: E402


class OriginCheck(OriginValidator):
    """Browsers always send Origin on a websocket handshake, so a present Origin must be one of
    ALLOWED_HOSTS: a page on another site cannot ride on the session cookie. Scripts and the CLI
    send none and authenticate with a bearer token."""

    def valid_origin(self, parsed_origin: Any) -> bool:
        return parsed_origin is None or bool(self.validate_origin(parsed_origin))


websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", RunConsumer.as_asgi()),
    path("ws/runs/", RunConsumer.as_asgi()),
    path("ws/evals/<int:eval_id>/", EvalConsumer.as_asgi()),
    path("ws/chats/<int:session_id>/", ChatConsumer.as_asgi()),
]

# What is loaded by now lives as long as the process (modules, settings, the URL resolver, filled
# here rather than by the first request): kept out of the cyclic garbage collector's passes
# (gc.freeze), which otherwise walk all of it, every thread stopped, for 150-200 ms on this
# machine: the slowest battles/next of a burst (benchmarks/battles.py).
get_resolver().reverse_dict  # noqa: B018 - fills the resolver
gc.collect()
gc.freeze()

application = ProtocolTypeRouter(
    {
        # Bearer-token metric batches skip Django's request machinery (see IngestRoute).
        # A voter's prepared next battle is handed out off Django's one sync thread (see NextRoute).
        # Oversized artifact uploads are refused before Django reads them (see UploadLimit).
        "http": IngestRoute(NextRoute(UploadLimit(django_asgi_app))),
        "websocket": OriginCheck(BearerAuthMiddleware(URLRouter(websocket_urlpatterns)), settings.ALLOWED_HOSTS),
    }
)
