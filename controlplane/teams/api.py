from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate, login, logout
from django.db.models import Prefetch
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_protect, ensure_csrf_cookie
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.generics import get_object_or_404
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import ApiError, ErrorSerializer, Pagination
from controlplane.auth.permissions import RunTokenScope
from controlplane.teams import selectors, services
from controlplane.teams.models import ApiToken, Membership, Role
from controlplane.teams.serializers import (
    LoginSerializer,
    MemberSerializer,
    MemberSetSerializer,
    ProjectCreateSerializer,
    ProjectSerializer,
    SessionSerializer,
    TeamCreateSerializer,
    TeamSerializer,
    TeamUpdateSerializer,
    TokenCreatedSerializer,
    TokenCreateSerializer,
    TokenSerializer,
)


def _session_body(request: Request) -> dict[str, Any]:
    user = request.user
    return {"user": {"id": user.id, "username": user.get_username()} if user.is_authenticated else None}


@method_decorator(ensure_csrf_cookie, name="get")
@method_decorator(csrf_protect, name="post")  # no login CSRF: DRF exempts anonymous requests otherwise
class SessionView(APIView):
    """Browser login. GET also sets the `csrftoken` cookie the SPA sends back as X-CSRFToken."""

    permission_classes = [AllowAny, RunTokenScope]

    @extend_schema(responses=SessionSerializer, summary="Who is signed in")
    def get(self, request: Request) -> Response:
        return Response(_session_body(request))

    @extend_schema(request=LoginSerializer, responses=SessionSerializer, summary="Sign in")
    def post(self, request: Request) -> Response:
        data = LoginSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = authenticate(request._request, **data.validated_data)
        if user is None or not user.is_active:
            raise ApiError("Wrong username or password.", code="invalid_credentials")
        login(request._request, user)
        request.user = user
        return Response(_session_body(request))

    @extend_schema(request=None, responses={204: None}, summary="Sign out")
    def delete(self, request: Request) -> Response:
        logout(request._request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenListView(APIView):
    permission_classes = [AllowAny, RunTokenScope]

    @extend_schema(responses=TokenSerializer(many=True), summary="Your tokens (secrets are never shown again)")
    def get(self, request: Request) -> Response:
        if not request.user.is_authenticated:
            raise ApiError("Sign in first.", code="not_authenticated", status_code=401)
        tokens = ApiToken.objects.filter(user=request.user).order_by("-created_at")
        return Response(TokenSerializer(tokens, many=True).data)

    @extend_schema(request=TokenCreateSerializer, responses={201: TokenCreatedSerializer}, summary="Create a token")
    def post(self, request: Request) -> Response:
        data = TokenCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        user: Any = request.user
        if fields.get("username"):
            user = authenticate(request._request, username=fields["username"], password=fields.get("password", ""))
            if user is None or not user.is_active:
                raise ApiError("Wrong username or password.", code="invalid_credentials", status_code=401)
        elif not user.is_authenticated:
            raise ApiError(
                "Give username and password, or sign in first.",
                code="not_authenticated",
                status_code=401,
                fields={"username": ["required when not signed in"]},
            )
        token, secret = services.token_create(user=user, name=fields.get("name", ""))
        body = {"id": token.id, "name": token.name, "token": secret, "created_at": token.created_at}
        return Response(TokenCreatedSerializer(body).data, status=status.HTTP_201_CREATED)


class TokenDetailView(APIView):
    @extend_schema(request=None, responses={204: None}, summary="Revoke a token")
    def delete(self, request: Request, token_id: int) -> Response:
        if not services.token_revoke(user=request.user, token_id=token_id):
            raise ApiError("No such active token.", code="not_found", status_code=404)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _teams_with_my_membership(user: Any) -> Any:
    return selectors.teams_visible_to(user).prefetch_related(
        Prefetch("memberships", queryset=Membership.objects.filter(user=user))
    )


class TeamListView(APIView):
    pagination_class = Pagination  # GET's answer, documented as such

    @extend_schema(responses=TeamSerializer(many=True), summary="Your teams")
    def get(self, request: Request) -> Response:
        paginator = Pagination()
        page: list[Any] | None = paginator.paginate_queryset(
            _teams_with_my_membership(request.user).order_by("slug"), request, self
        )
        return paginator.get_paginated_response(TeamSerializer(page, many=True, context={"request": request}).data)

    @extend_schema(request=TeamCreateSerializer, responses={201: TeamSerializer}, summary="Create a team")
    def post(self, request: Request) -> Response:
        data = TeamCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        team = services.team_create(user=request.user, **data.validated_data)
        team = _teams_with_my_membership(request.user).get(id=team.id)
        return Response(TeamSerializer(team, context={"request": request}).data, status=status.HTTP_201_CREATED)


class TeamDetailView(APIView):
    @extend_schema(responses=TeamSerializer, summary="A team")
    def get(self, request: Request, team_id: int) -> Response:
        team = get_object_or_404(_teams_with_my_membership(request.user), id=team_id)
        return Response(TeamSerializer(team, context={"request": request}).data)

    @extend_schema(
        request=TeamUpdateSerializer, responses={200: TeamSerializer, 403: ErrorSerializer}, summary="Change a team"
    )
    def patch(self, request: Request, team_id: int) -> Response:
        team = get_object_or_404(selectors.teams_visible_to(request.user), id=team_id)
        data = TeamUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.team_update(actor=request.user, team=team, **data.validated_data)
        team = _teams_with_my_membership(request.user).get(id=team.id)
        return Response(TeamSerializer(team, context={"request": request}).data)


class MemberListView(APIView):
    @extend_schema(responses=MemberSerializer(many=True), summary="Members of a team")
    def get(self, request: Request, team_id: int) -> Response:
        team = get_object_or_404(selectors.teams_visible_to(request.user), id=team_id)
        members = team.memberships.select_related("user").order_by("user__username")
        return Response(MemberSerializer(members, many=True).data)

    @extend_schema(
        request=MemberSetSerializer, responses={200: MemberSerializer}, summary="Add a member or change a role"
    )
    def post(self, request: Request, team_id: int) -> Response:
        team = get_object_or_404(selectors.teams_visible_to(request.user), id=team_id)
        data = MemberSetSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = services.membership_set(
            actor=request.user,
            team=team,
            username=data.validated_data["username"],
            role=Role(data.validated_data["role"]),
        )
        return Response(MemberSerializer(membership).data)


class MemberDetailView(APIView):
    @extend_schema(request=None, responses={204: None, 409: ErrorSerializer}, summary="Remove a member")
    def delete(self, request: Request, team_id: int, user_id: int) -> Response:
        team = get_object_or_404(selectors.teams_visible_to(request.user), id=team_id)
        services.membership_remove(actor=request.user, team=team, user_id=user_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ProjectListView(APIView):
    pagination_class = Pagination  # GET's answer, documented as such

    @extend_schema(
        parameters=[OpenApiParameter("team", str, description="Team slug")],
        responses=ProjectSerializer(many=True),
        summary="Projects of your teams",
    )
    def get(self, request: Request) -> Response:
        projects = selectors.projects_visible_to(request.user).order_by("team__slug", "name")
        if team := request.query_params.get("team"):
            projects = projects.filter(team__slug=team)
        paginator = Pagination()
        page = paginator.paginate_queryset(projects, request, self)
        return paginator.get_paginated_response(ProjectSerializer(page, many=True).data)

    @extend_schema(
        request=ProjectCreateSerializer,
        responses={201: ProjectSerializer, 404: ErrorSerializer},
        summary="Create a project (404: not in that team)",
    )
    def post(self, request: Request) -> Response:
        data = ProjectCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        team = selectors.teams_visible_to(request.user).filter(slug=data.validated_data["team"]).first()
        if team is None:
            raise ApiError(
                f"You are not in a team '{data.validated_data['team']}'.",
                code="not_found",
                status_code=404,
                fields={"team": ["not found"]},
            )
        # Checked here as well as on creation: a viewer naming an existing project must not get
        # the 201 of a write it may not make.
        if not selectors.team_role_at_least(request.user, team.id, Role.MEMBER):
            raise ApiError("Viewers cannot create projects.", code="permission_denied", status_code=403)
        project = services.project_get_or_create(user=request.user, team=team, name=data.validated_data["name"])
        return Response(ProjectSerializer(project).data, status=status.HTTP_201_CREATED)
