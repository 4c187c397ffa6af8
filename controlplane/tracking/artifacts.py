"""MLflow's artifact proxy, `/mlflow/api/2.0/mlflow-artifacts/artifacts`, on Barrel's run artifacts.

A run's artifact_uri is `mlflow-artifacts:/<experiment_id>/<run_id>/artifacts`; the mlflow
client (MlflowArtifactsRepository, an HttpArtifactRepository) resolves it against the tracking
URI and then sends, with the same bearer token as every tracking call:

- `PUT .../artifacts/<exp>/<run>/artifacts/<path>`, the file as the raw body (log_artifact,
  log_dict, log_text, log_figure...);
- `GET .../artifacts?path=<exp>/<run>/artifacts[/<dir>]` → `{"files": [{"path": <name>,
  "is_dir", "file_size"}]}`, names relative to the listed directory (list_artifacts);
- `GET .../artifacts/<exp>/<run>/artifacts/<path>`, the file streamed (download_artifacts).

Multipart uploads are off unless the server's /server-info enables them, which Barrel's does
not serve; a client that forces them (MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD) gets the answer
that makes it fall back to a plain PUT.
"""

from __future__ import annotations

from typing import Any

from django.http import FileResponse
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.artifacts import selectors as artifact_selectors
from controlplane.artifacts import services as artifact_services
from controlplane.artifacts.api import file_response
from controlplane.artifacts.paths import clean_path
from controlplane.runs.models import Run, RunToken
from controlplane.tracking import selectors
from controlplane.tracking.api import MlflowView, check_active
from controlplane.tracking.errors import NOT_IMPLEMENTED, MlflowError, invalid, not_found

_LAYOUT = "<experiment_id>/<run_id>/artifacts/<path>, as in the run's artifact_uri"


def _located(request: Request, location: str, *, field: str) -> tuple[Run, str]:
    """The run a proxied artifact path is in, and the path inside its artifact root. Anything
    outside a run the caller may see (another team's, another run for a run token) is a 404."""
    parts = clean_path(location, field=field).split("/", 3)
    if len(parts) < 3 or parts[2] != "artifacts":
        raise not_found(f"No artifacts at '{location}': Barrel keeps a run's artifacts at {_LAYOUT}.")
    token_run_id = request.auth.run_id if isinstance(request.auth, RunToken) else None
    run = selectors.run_lookup(user=request.user, run_id=parts[1], token_run_id=token_run_id)
    if str(run.project_id) != parts[0]:
        raise not_found(f"Run with id={parts[1]} not found.")  # the words run_lookup uses
    return run, parts[3] if len(parts) == 4 else ""


class ArtifactListView(MlflowView):
    run_token_allowed = True

    def get(self, request: Request) -> Response:
        location = request.query_params.get("path")
        if not location:
            raise invalid(f"Missing value for required parameter 'path' ({_LAYOUT}).")
        run, path = _located(request, location, field="path")
        files = []
        for entry in artifact_selectors.artifacts_list(run_id=run.id, path=path):
            file: dict[str, Any] = {"path": entry.name, "is_dir": entry.is_dir}
            if entry.size is not None:
                file["file_size"] = entry.size
            files.append(file)
        return Response({"files": files})


class ArtifactView(MlflowView):
    run_token_allowed = True
    parser_classes: list[Any] = []  # a PUT's body is the file itself, read as a stream

    def get(self, request: Request, artifact_path: str) -> FileResponse:
        run, path = _located(request, artifact_path, field="artifact_path")
        path = clean_path(path, field="artifact_path", allow_root=False)
        return file_response(artifact_selectors.artifact_open(run_id=run.id, path=path), path)

    def put(self, request: Request, artifact_path: str) -> Response:
        run, path = _located(request, artifact_path, field="artifact_path")
        path = clean_path(path, field="artifact_path", allow_root=False)
        artifact_services.check_may_write(user=request.user, auth=request.auth, run=run)
        check_active(run)
        length = request.META.get("CONTENT_LENGTH")
        artifact_services.artifact_upload(
            run=run,
            path=path,
            # Django's request, not DRF's stream (which reads a body without Content-Length,
            # chunked, as empty).
            body=request._request,
            declared_length=int(length) if length and length.isdigit() else None,
        )
        return Response({})

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        return super().perform_content_negotiation(request, force=True)  # a download answers the file


class MultipartUploadView(MlflowView):
    """mpu/create|complete|abort: the words MLflow's client looks for to fall back to a PUT."""

    run_token_allowed = True

    def post(self, request: Request, artifact_path: str = "") -> Response:
        raise MlflowError(NOT_IMPLEMENTED, "Multipart upload is not supported for the current artifact repository")
