"""The runs API: each view parses its input, calls one service or selector, and renders the answer.

Domain errors are turned into HTTP answers by runs.api.exceptions.api_exception_handler.

Who may do what: every endpoint needs an authenticated user (settings.REST_FRAMEWORK). Any authenticated user
may read, start and cancel any run: this is deliberate, the API serves the staff console and its API clients,
not end customers, so there is no per-run ownership check. Deciding an approval needs the reviewer permission
``approvals.decide_approvalrequest`` (the reviewers group).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from approvals.errors import ApprovalNotFound
from approvals.services import approval_decide
from runs.api.serializers import (
    AgentCheckpointSerializer,
    ApprovalDecideInputSerializer,
    ApprovalRequestSerializer,
    CheckpointListFilterSerializer,
    ErrorSerializer,
    RunDetailSerializer,
    RunListFilterSerializer,
    RunSerializer,
    RunStartInputSerializer,
)
from runs.errors import RunNotFound
from runs.models import RUN_ID_VALIDATOR
from runs.selectors import run_checkpoint_list, run_get, run_list
from runs.services import run_cancel, run_start

__all__ = [
    "ApprovalDecideApi",
    "RunCancelApi",
    "RunCheckpointListApi",
    "RunCollectionApi",
    "RunDetailApi",
    "RunListApi",
    "RunStartApi",
]

_NOT_AUTHENTICATED = OpenApiResponse(ErrorSerializer, description="No or bad credentials.")
_NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No such run.")


def _path_run_id(value: str) -> str:
    """The run id of a URL; one no run can have is a 404 before any query (a NUL byte would upset PostgreSQL)."""
    if not RUN_ID_VALIDATOR.regex.fullmatch(value):
        raise RunNotFound(value[:200])
    return value


def _path_approval_id(run_id: str, value: str) -> str:
    if not 1 <= len(value) <= 200 or "\x00" in value:
        raise ApprovalNotFound(run_id, value[:200])
    return value


class _PaginatedApi(APIView):
    """Pages a list as {"count", "next", "previous", "results"}.

    A plain APIView rather than a GenericAPIView: the browsable API and OPTIONS would ask a GenericAPIView for
    its one serializer_class, and these views have none (their input and output serializers differ).
    """

    # The setting's class; drf-spectacular reads this attribute to document the page shape.
    pagination_class = api_settings.DEFAULT_PAGINATION_CLASS

    def paginated(self, request: Request, rows, serializer_class) -> Response:
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(serializer_class(page, many=True).data)


class RunListApi(_PaginatedApi):
    """Runs, newest first, in the list representation (no legs, effects or pending approvals: one query a page)."""

    @extend_schema(
        operation_id="runs_list",
        summary="List runs",
        description="Runs, newest first, paginated, filterable by status and agent. Each run is in the list "
        "representation: no input messages, pending approvals, legs or effects (GET the run for those).",
        parameters=[RunListFilterSerializer],
        responses={
            200: RunSerializer(many=True),
            400: OpenApiResponse(ErrorSerializer, description="A filter is not valid (e.g. an unknown status)."),
            403: _NOT_AUTHENTICATED,
        },
    )
    def get(self, request: Request) -> Response:
        filters = RunListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        return self.paginated(request, run_list(**filters.validated_data), RunSerializer)


class RunStartApi(APIView):
    @extend_schema(
        operation_id="runs_start",
        summary="Start a run",
        description="Queue a run of a registered agent on the given messages. JSON input accepts text parts "
        "(and tool_call / tool_result parts in assistant / tool messages); images and files are refused. "
        "Bodies over 1 MiB answer 413.",
        request=RunStartInputSerializer,
        responses={
            201: RunDetailSerializer,
            400: OpenApiResponse(ErrorSerializer, description="Field errors, an unknown agent, malformed JSON."),
            403: _NOT_AUTHENTICATED,
            409: OpenApiResponse(ErrorSerializer, description="A run with this run_id exists."),
            413: OpenApiResponse(ErrorSerializer, description="The body is larger than 1 MiB."),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = RunStartInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run = run_start(**serializer.validated_data, user=request.user)
        return Response(RunDetailSerializer(run).data, status=status.HTTP_201_CREATED)


class RunCollectionApi(RunListApi, RunStartApi):
    """``/api/runs/``: GET lists runs (RunListApi), POST starts one (RunStartApi); one path, so one view."""


class RunDetailApi(APIView):
    @extend_schema(
        operation_id="runs_retrieve",
        summary="One run with its pending approvals, legs and effects",
        description="The run's status and cumulative usage, the messages it started from, the approval requests "
        "it waits on (with the tokens a verdict must echo), its legs (owner epochs) and effects (ledger).",
        responses={200: RunDetailSerializer, 403: _NOT_AUTHENTICATED, 404: _NOT_FOUND},
    )
    def get(self, request: Request, run_id: str) -> Response:
        run = run_get(run_id=_path_run_id(run_id))
        return Response(RunDetailSerializer(run).data)


class RunCheckpointListApi(_PaginatedApi):
    """Every stored checkpoint of a run, oldest first (time travel)."""

    @extend_schema(
        operation_id="runs_checkpoints_list",
        summary="The run's checkpoints, oldest first",
        description="Every stored AgentCheckpoint of the run (time travel), paginated. Bytes in message parts "
        "are rendered as {\"$bytes\": \"<base64>\"}.",
        parameters=[CheckpointListFilterSerializer],
        responses={200: AgentCheckpointSerializer(many=True), 403: _NOT_AUTHENTICATED, 404: _NOT_FOUND},
    )
    def get(self, request: Request, run_id: str) -> Response:
        filters = CheckpointListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        run = run_get(run_id=_path_run_id(run_id))
        checkpoints = run_checkpoint_list(run=run, **filters.validated_data)
        return self.paginated(request, checkpoints, AgentCheckpointSerializer)


class CanDecideApprovals(BasePermission):
    """Reviewers only: the permission the reviewers group holds."""

    message = "Deciding approvals needs the reviewer permission (approvals.decide_approvalrequest)."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return request.user.has_perm("approvals.decide_approvalrequest")


class ApprovalDecideApi(APIView):
    permission_classes = [IsAuthenticated, CanDecideApprovals]

    @extend_schema(
        operation_id="runs_approvals_decide",
        summary="Approve or deny a pending tool call",
        description="Record a reviewer's verdict once. The token must be the request's own, signed for this run. "
        "When every request of the suspended step has a verdict, the run is queued to resume.",
        request=ApprovalDecideInputSerializer,
        responses={
            200: ApprovalRequestSerializer,
            400: OpenApiResponse(ErrorSerializer, description="Field errors, or a token that does not verify "
                                                              "for this request and run (it authorizes nothing)."),
            403: OpenApiResponse(ErrorSerializer, description="Not logged in, or not a reviewer."),
            404: OpenApiResponse(ErrorSerializer, description="No such run or approval request."),
            409: OpenApiResponse(ErrorSerializer, description="Decided, expired, superseded, used, or the run "
                                                              "was cancelled."),
        },
    )
    def post(self, request: Request, run_id: str, approval_id: str) -> Response:
        serializer = ApprovalDecideInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        approval = approval_decide(
            run_id=_path_run_id(run_id),
            approval_id=_path_approval_id(run_id, approval_id),
            user=request.user,
            **serializer.validated_data,
        )
        return Response(ApprovalRequestSerializer(approval).data)


class RunCancelApi(APIView):
    @extend_schema(
        operation_id="runs_cancel",
        summary="Cancel a run",
        description="No new model calls and no new effects. A queued or suspended run is cancelled at once and "
        "its pending approvals are superseded; a running leg stops at its next await point.",
        request=None,
        responses={
            200: RunDetailSerializer,
            403: _NOT_AUTHENTICATED,
            404: _NOT_FOUND,
            409: OpenApiResponse(ErrorSerializer, description="The run is completed, failed or cancelled already."),
        },
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = run_cancel(run_id=_path_run_id(run_id))
        return Response(RunDetailSerializer(run).data)
