"""The default permission that confines run tokens.

A run token authenticates as the run's creator but may touch only its own run, and only
through views that declare `run_token_allowed = True`. The check is a default permission class
(settings.REST_FRAMEWORK), so a new view is closed to run tokens unless it opts in. Roles are
checked where a view writes (auth.access.accessible_run(write=True), auth.policy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from controlplane.runs.models import RunToken

if TYPE_CHECKING:  # rest_framework.views imports this module through the settings
    from rest_framework.views import APIView


def check_run_scope(auth: object, run_id: object) -> None:
    """A run token may touch only its own run: for any other, the same 404 as for another
    team's run (do not reveal that it exists)."""
    if isinstance(auth, RunToken) and (run_id is None or str(run_id) != str(auth.run_id)):
        raise exceptions.NotFound("Run not found.")


class RunTokenScope(BasePermission):
    """A run token reads its own run and writes its job's reports into it (views that declare
    `run_token_allowed`); anything else is 403, and any route of another run 404."""

    message = "A run token may only read its own run and report into it."

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not isinstance(request.auth, RunToken):
            return True
        run_id = view.kwargs.get("run_id")
        if run_id is not None:
            check_run_scope(request.auth, run_id)  # another run does not exist, whatever the route
        if not getattr(view, "run_token_allowed", False):
            return False
        check_run_scope(request.auth, run_id)
        return True
