"""GET /mlflow/: where the links the mlflow client prints land.

After a run the client prints `<tracking URI>/#/experiments/3/runs/9` and
`<tracking URI>/#/experiments/3`, links into MLflow's own UI. The fragment never reaches the
server, so /mlflow/ answers the dashboard, whose route for it (frontend/src/pages/mlflow/)
reads location.hash and goes on to the run's page, or to the experiment's runs.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from controlplane import frontend
from controlplane.tracking.api import EndpointNotFoundView

_not_found = EndpointNotFoundView.as_view()


@csrf_exempt  # any other method answers MLflow's JSON, not Django's CSRF page
def mlflow_ui(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
    if request.method in ("GET", "HEAD"):
        return frontend.index(request)
    return _not_found(request)
