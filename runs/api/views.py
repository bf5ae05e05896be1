"""The runs API: each view parses its input, reads through selectors or writes through one service, and renders.

Domain errors become HTTP answers in runs.api.error_handler.api_exception_handler.

Who may do what (runs.access and approvals.roles, applied by the classes of runs.api.permissions): every
endpoint needs a signed-in user, and a request without credentials is a 401 asking for a Token. A user lists
and reads their own runs, or every run if they may read every run (support, reviewers); a run they may not read
is a 404, exactly as an unknown one. They cancel their own runs; a run they may read but not cancel is a 403.
Deciding needs the reviewers' permission, and only those who may decide see approval tokens.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.roles import approval_is_decidable_by
from approvals.selectors import approval_pending_list
from approvals.services import approval_decide
from runs.access import CANCEL_EVERY_RUN, VIEW_EVERY_RUN, runs_readable_by
from runs.api.inputs import (
    ApprovalDecideInputSerializer,
    CheckpointListFilterSerializer,
    RunCancelInputSerializer,
    RunListFilterSerializer,
    RunStartInputSerializer,
    path_approval_id,
    path_run_id,
)
from runs.api.outputs import (
    SHOW_TOKENS,
    AgentCheckpointSerializer,
    AgentSerializer,
    ApprovalRequestSerializer,
    RunDetail,
    RunDetailSerializer,
    RunSerializer,
)
from runs.api.idempotency import (
    IDEMPOTENCY_KEY,
    IDEMPOTENCY_KEY_IN_FLIGHT,
    IDEMPOTENCY_KEY_REUSED,
    IDEMPOTENT_REPLAYED,
    idempotent_response,
)
from runs.api.parsers import ChunkedBodyRequest
from runs.api.permissions import CanCancelRun, CanDecideApprovals, CanReadRun
from runs.agents import agent_list
from runs.api.schema import (
    APPROVAL_ID_PATH,
    CSRF_REFUSED,
    RUN_ID_PATH,
    UNAUTHENTICATED,
    WWW_AUTHENTICATE,
    error_answer,
)
from runs.models import Run
from runs.selectors import (
    run_checkpoint_list,
    run_effect_list,
    run_get,
    run_input_messages,
    run_leg_list,
    run_list,
)
from runs.services.idempotency import IdempotentAnswer
from runs.services.lifecycle import run_cancel, run_start

__all__ = [
    "AgentListApi",
    "ApiPagination",
    "ApprovalDecideApi",
    "RunCancelApi",
    "RunCheckpointListApi",
    "RunCollectionApi",
    "RunDetailApi",
    "RunListApi",
    "RunStartApi",
]

_NOT_FOUND = error_answer("No such run, or one you may not read.")
_NOT_FOUND_OR_PAGE = error_answer(
    'No such run, or one you may not read; or a page that does not exist ("Invalid page.").'
)
_TOO_LARGE = error_answer("The body is larger than 1 MiB (chunked bodies too).")
_NOT_JSON = error_answer("The body is not application/json.")


def _run_detail(run: Run) -> RunDetail:
    """What a run's detail answer shows, read here so that the serializer only renders."""
    return RunDetail(
        run=run,
        input_messages=run_input_messages(run),
        pending_approvals=[request.as_request() for request in approval_pending_list(run=run)],
        legs=run_leg_list(run=run),
        effects=run_effect_list(run=run),
    )


def _render_context(request: Request) -> dict[str, Any]:
    return {"request": request, SHOW_TOKENS: approval_is_decidable_by(user=request.user)}


class _Api(APIView):
    """The API's views: DRF's, with a request class that reads chunked bodies (runs.api.parsers)."""

    def initialize_request(self, request, *args, **kwargs) -> Request:
        return ChunkedBodyRequest(
            request,
            parsers=self.get_parsers(),
            authenticators=self.get_authenticators(),
            negotiator=self.get_content_negotiator(),
            parser_context=self.get_parser_context(request),
        )

    def run_checked(self, request: Request, run_id: str) -> Run:
        """The run of the URL, once the view's permission classes allow this user to act on it."""
        run = run_get(run_id=path_run_id(run_id))
        self.check_object_permissions(request, run)
        return run


class ApiPagination(PageNumberPagination):
    """DRF's page numbers, exactly as the document says: a whole number from 1 (DRF also reads "last")."""

    last_page_strings = ()

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"]["minimum"] = 1
        return parameters


class _PaginatedApi(_Api):
    """Pages a list as {"count", "next", "previous", "results"}.

    A plain APIView rather than a GenericAPIView: the browsable API and OPTIONS would ask a GenericAPIView for
    its one serializer_class, and these views have none (their input and output serializers differ).
    """

    # drf-spectacular reads this attribute to document the page shape.
    pagination_class = ApiPagination

    def paginated(self, request: Request, rows, serializer_class) -> Response:
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        rendered = serializer_class(page, many=True, context=_render_context(request))
        return paginator.get_paginated_response(rendered.data)


class RunListApi(_PaginatedApi):
    """Runs the user may read, newest first, in the list representation (no legs, effects or approvals)."""

    @extend_schema(
        operation_id="runs_list",
        summary="List runs",
        description=f"Runs you may read (your own; every run with {VIEW_EVERY_RUN}), newest first, paginated, "
        "filterable by status, agent and creator (an empty value is no filter), and by metadata: "
        "`?metadata.KEY=VALUE` keeps the runs whose metadata has the string VALUE at its top-level KEY (KEY 1-100 "
        "letters, digits, '_', '.', ':' or '-'; several filters all apply). "
        "Each run is in the list representation: no input messages, pending approvals, legs or effects (GET the "
        "run for those).",
        parameters=[RunListFilterSerializer, WWW_AUTHENTICATE],
        responses={
            200: RunSerializer(many=True),
            400: error_answer("A filter is not valid (e.g. an unknown status)."),
            401: UNAUTHENTICATED,
            404: error_answer('A page that does not exist ("Invalid page.").'),
        },
    )
    def get(self, request: Request) -> Response:
        filters = RunListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        runs = runs_readable_by(run_list(**filters.validated_data), user=request.user)
        return self.paginated(request, runs, RunSerializer)


class RunStartApi(_Api):
    @extend_schema(
        operation_id="runs_start",
        summary="Start a run",
        description="Queue a run of a registered agent on the given messages, created by you. JSON input accepts "
        "user, system and assistant text; tool calls and tool results come from the run's own model and tools and "
        "are refused, as are images and files. Bodies over 1 MiB answer 413. With an `Idempotency-Key`, a repeat "
        "of the request starts nothing and gets the first answer.",
        request=RunStartInputSerializer,
        parameters=[IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED, WWW_AUTHENTICATE],
        responses={
            201: RunDetailSerializer,
            400: error_answer("Field errors, an unknown agent, malformed JSON, an Idempotency-Key that is not "
                              "1-255 visible ASCII characters."),
            401: UNAUTHENTICATED,
            403: error_answer(f"Refused for {CSRF_REFUSED}."),
            409: error_answer(f"A run with this run_id exists, or {IDEMPOTENCY_KEY_IN_FLIGHT}."),
            413: _TOO_LARGE,
            415: _NOT_JSON,
            422: IDEMPOTENCY_KEY_REUSED,
        },
    )
    def post(self, request: Request) -> Response:
        def started() -> IdempotentAnswer:
            serializer = RunStartInputSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            run = run_start(**serializer.validated_data, user=request.user)
            detail = RunDetailSerializer(_run_detail(run), context=_render_context(request))
            return IdempotentAnswer(status=status.HTTP_201_CREATED, body=detail.data)

        return idempotent_response(request, scope="POST /api/runs/", answer=started)


class AgentListApi(_PaginatedApi):
    """The agents a user may start, by name."""

    @extend_schema(
        operation_id="agents_list",
        summary="The agents a run can name",
        description="Every agent a signed-in user may start (the built-in ones and the operator's DEUZ_AGENTS): its "
        "description, who decides its approvals, and its tools with their input schemas, approval policy and "
        "effect. An agent whose factory fails to build is listed with its problem.",
        parameters=[WWW_AUTHENTICATE],
        responses={200: AgentSerializer(many=True), 401: UNAUTHENTICATED,
                   404: error_answer('A page that does not exist ("Invalid page.").')},
    )
    def get(self, request: Request) -> Response:
        return self.paginated(request, agent_list(), AgentSerializer)


class RunCollectionApi(RunListApi, RunStartApi):
    """``/api/runs/``: GET lists runs (RunListApi), POST starts one (RunStartApi); one path, so one view."""


class RunDetailApi(_Api):
    permission_classes = [IsAuthenticated, CanReadRun]

    @extend_schema(
        operation_id="runs_retrieve",
        summary="One run with its pending approvals, legs and effects",
        description="The run's status and cumulative usage, the messages it started from, the approval requests "
        "it waits on (with the tokens a verdict must echo, for users who may decide), its legs (owner epochs) and "
        "effects (ledger).",
        parameters=[RUN_ID_PATH, WWW_AUTHENTICATE],
        responses={200: RunDetailSerializer, 401: UNAUTHENTICATED, 404: _NOT_FOUND},
    )
    def get(self, request: Request, run_id: str) -> Response:
        run = self.run_checked(request, run_id)
        return Response(RunDetailSerializer(_run_detail(run), context=_render_context(request)).data)


class RunCheckpointListApi(_PaginatedApi):
    """Every stored checkpoint of a run, oldest first (time travel)."""

    permission_classes = [IsAuthenticated, CanReadRun]

    @extend_schema(
        operation_id="runs_checkpoints_list",
        summary="The run's checkpoints, oldest first",
        description="Every stored AgentCheckpoint of the run (time travel), paginated. Bytes in message parts "
        "are rendered as {\"$bytes\": \"<base64>\"}; pending approvals carry tokens only for users who may decide.",
        parameters=[RUN_ID_PATH, CheckpointListFilterSerializer, WWW_AUTHENTICATE],
        responses={
            200: AgentCheckpointSerializer(many=True),
            400: error_answer("include_sub_agents is not true or false."),
            401: UNAUTHENTICATED,
            404: _NOT_FOUND_OR_PAGE,
        },
    )
    def get(self, request: Request, run_id: str) -> Response:
        filters = CheckpointListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        run = self.run_checked(request, run_id)
        checkpoints = run_checkpoint_list(run=run, **filters.validated_data)
        return self.paginated(request, checkpoints, AgentCheckpointSerializer)


class ApprovalDecideApi(_Api):
    permission_classes = [IsAuthenticated, CanDecideApprovals]

    @extend_schema(
        operation_id="runs_approvals_decide",
        summary="Approve or deny a pending tool call",
        description="Record a reviewer's verdict once. The token must be the request's own, signed for this run. "
        "When every request of the suspended step has a verdict, the run is queued to resume.",
        request=ApprovalDecideInputSerializer,
        parameters=[RUN_ID_PATH, APPROVAL_ID_PATH, WWW_AUTHENTICATE],
        responses={
            200: ApprovalRequestSerializer,
            400: error_answer("Field errors, or a token that does not verify for this request and run (it "
                              "authorizes nothing)."),
            401: UNAUTHENTICATED,
            403: error_answer(f"Not a reviewer, or {CSRF_REFUSED}."),
            404: error_answer("No such run or approval request."),
            409: error_answer("Decided, expired, superseded, used, or the run was cancelled."),
            413: _TOO_LARGE,
            415: _NOT_JSON,
        },
    )
    def post(self, request: Request, run_id: str, approval_id: str) -> Response:
        serializer = ApprovalDecideInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        approval = approval_decide(
            run_id=path_run_id(run_id),
            approval_id=path_approval_id(run_id, approval_id),
            user=request.user,
            **serializer.validated_data,
        )
        return Response(ApprovalRequestSerializer(approval).data)


class RunCancelApi(_Api):
    permission_classes = [IsAuthenticated, CanReadRun, CanCancelRun]

    @extend_schema(
        operation_id="runs_cancel",
        summary="Cancel a run",
        description="No new model calls and no new effects. A queued or suspended run is cancelled at once and "
        "its pending approvals are superseded; a running leg stops within a second, between two deltas or steps "
        "(an effect already started completes its record first). Its stream ends with a `cancelled` part (`by`, "
        "`reason`) and a finish whose `finish_reason` is `cancelled`. The body is optional. You cancel your own "
        f"runs; cancelling another's needs {CANCEL_EVERY_RUN}.",
        request=RunCancelInputSerializer,
        parameters=[RUN_ID_PATH, WWW_AUTHENTICATE],
        responses={
            200: RunDetailSerializer,
            400: error_answer("Field errors (a reason that is not a string or is too long, an unknown key)."),
            401: UNAUTHENTICATED,
            403: error_answer(f"A run you may read but not cancel, or {CSRF_REFUSED}."),
            404: _NOT_FOUND,
            409: error_answer("The run is completed, failed or cancelled already."),
            413: _TOO_LARGE,
            415: _NOT_JSON,
        },
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = self.run_checked(request, run_id)
        serializer = RunCancelInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run = run_cancel(run_id=run.run_id, user=request.user, **serializer.validated_data)
        return Response(RunDetailSerializer(_run_detail(run), context=_render_context(request)).data)
