"""Serves the built dashboard (index.html for every page path, files under /assets/) and the
apps' static files under /static/ (Swagger UI for /api/docs/): uvicorn serves no files itself."""

from __future__ import annotations

from django.conf import settings
from django.contrib.staticfiles import finders
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.static import serve


@ensure_csrf_cookie
def index(request: HttpRequest, path: str = "") -> HttpResponseBase:
    page = settings.FRONTEND_DIST / "index.html"
    if not page.exists():
        return HttpResponse(
            "The dashboard is not built. Run `make frontend` (or `make demo`), then reload.",
            status=503,
            content_type="text/plain",
        )
    response = FileResponse(page.open("rb"), content_type="text/html")
    response["Cache-Control"] = "no-cache"
    return response


def assets(request: HttpRequest, path: str) -> HttpResponseBase:
    response = serve(request, path, document_root=str(settings.FRONTEND_DIST / "assets"))
    # Vite puts a content hash in every asset name: they never change under the same URL.
    response["Cache-Control"] = "public, max-age=31536000, immutable"
    return response


def static(request: HttpRequest, path: str) -> HttpResponseBase:
    """A file of an installed app's static/ folder, found as collectstatic would find it (the
    finders refuse paths outside those folders)."""
    found = finders.find(path)
    if not isinstance(found, str):
        raise Http404(path)
    response = FileResponse(open(found, "rb"))
    response["Cache-Control"] = "public, max-age=3600"
    return response
