"""The runs API: each view parses its input, reads through selectors or writes through one service, and renders.

Domain errors become HTTP answers in runs.api.error_handler.api_exception_handler.

Who may do what (runs.access and approvals.roles, applied by the classes of runs.api.permissions): every
endpoint needs a signed-in user, and a request without credentials is a 401 asking for a Token. A user lists
and reads their own runs, or every run if they may read every run (support, reviewers); a run they may not read
is a 404, exactly as an unknown one. They cancel their own runs; a run they may read but not cancel is a 403.
Deciding needs the reviewers' permission, and only those who may decide see approval tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from approvals.roles import NOT_DECIDABLE, approval_is_decidable_by
from approvals.selectors import approval_pending_list, approval_run_list
from approvals.services import approval_decide
from runs.access import CANCEL_EVERY_RUN, VIEW_EVERY_RUN, runs_readable_by
from runs.api.inputs import (
    ApprovalDecideInputSerializer,
    CheckpointListFilterSerializer,
    RunCancelInputSerializer,
    RunForkInputSerializer,
    RunListFilterSerializer,
    RunStartInputSerializer,
    path_approval_id,
    path_run_id,
    path_step_index,
)
from runs.api.outputs import (
    SHOW_TOKENS,
    AgentCheckpointSerializer,
    AgentSerializer,
    ApprovalRequestSerializer,
    RunDetail,
    RunDetailSerializer,
    RunSerializer,
    RunSummary,
)
from runs.api.generic import ApiPagination, ApiView, PaginatedApiView, validated_input
from runs.api.idempotency import (
    IDEMPOTENCY_KEY,
    IDEMPOTENCY_KEY_IN_FLIGHT,
    IDEMPOTENCY_KEY_REUSED,
    IDEMPOTENT_REPLAYED,
    idempotent_response,
)
from runs.api.permissions import CanCancelRun, CanDecideApprovals, CanForkRun, CanReadRun
from runs.agents import agent_list
from runs.api.schema import (
    APPROVAL_ID_PATH,
    BAD_PAGE,
    STEP_INDEX_PATH,
    CSRF_REFUSED,
    RUN_ID_PATH,
    UNAUTHENTICATED,
    WWW_AUTHENTICATE,
    error_answer,
    json_body_answers,
)
from runs.errors import RunNotFound
from runs.models import Run
from runs.presenters.leg_ends import run_leg_ends
from runs.presenters.outcome import RUN_LIST_PREFETCH, run_approvals_told, run_list_outcome, run_outcome_get
from runs.selectors import (
    run_checkpoint_list,
    run_effect_list,
    run_get,
    run_input_messages,
    run_leg_list,
    run_list,
)
from runs.services.idempotency import IdempotentAnswer
from runs.services.fork import run_fork
from runs.services.lifecycle import run_cancel, run_start

__all__ = [
    "AgentListApi",
    "ApiPagination",
    "ApprovalDecideApi",
    "RunCancelApi",
    "RunCheckpointListApi",
    "RunCollectionApi",
    "RunDetailApi",
    "RunForkApi",
    "RunListApi",
    "RunStartApi",
    "run_detail_json",
]

_NOT_FOUND = error_answer("No such run, or one you may not read.")
_NOT_FOUND_OR_PAGE = error_answer(
    'No such run, or one you may not read; or a page that does not exist ("Invalid page.").'
)


def _run_detail(run: Run) -> RunDetail:
    """What a run's detail answer shows, read here so that the serializer only renders."""
    return RunDetail(
        run=run,
        outcome=run_outcome_get(run),
        approvals=run_approvals_told(approval_run_list(run=run)),
        input_messages=run_input_messages(run),
        pending_approvals=[request.as_request() for request in approval_pending_list(run=run)],
        legs=run_leg_ends(run, list(run_leg_list(run=run))),
        effects=run_effect_list(run=run),
    )


def run_detail_json(run: Run, request: Request) -> dict[str, Any]:
    """A run's detail answer as ``request``'s user may see it (approval tokens only for those who may decide)."""
    return RunDetailSerializer(_run_detail(run), context=_render_context(request, run)).data


def _run_summary(run: Run) -> RunSummary:
    """A listed run with its outcome and approvals, from its prefetched RUN_LIST_PREFETCH."""
    return RunSummary(
        run=run,
        outcome=run_list_outcome(run)[1],
        approvals=run_approvals_told(sorted(run.approval_requests.all(), key=lambda request: request.pk)),
    )


class _Presented:
    """A queryset the paginator counts and slices, whose rows come out through ``present``: only a page's rows
    are presented."""

    def __init__(self, rows: QuerySet, present: Callable[[Any], Any]) -> None:
        self.rows, self.present = rows, present

    @property
    def ordered(self) -> bool:
        return self.rows.ordered

    def count(self) -> int:
        return self.rows.count()

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, index: slice) -> list[Any]:
        return [self.present(row) for row in self.rows[index]]


def _render_context(request: Request, run: Run | None = None) -> dict[str, Any]:
    return {"request": request, SHOW_TOKENS: approval_is_decidable_by(user=request.user, run=run)}


class _Api(ApiView):
    """The runs API's views: the API's view class (runs.api.generic), and the run of the URL."""

    def run_checked(self, request: Request, run_id: str) -> Run:
        """The run of the URL, once the view's permission classes allow this user to act on it."""
        run = run_get(run_id=path_run_id(run_id))
        self.check_object_permissions(request, run)
        return run


class _PaginatedApi(PaginatedApiView, _Api):
    """Pages a list of runs' parts, rendered with approval tokens only for users who may decide."""

    def serializer_context(self, request: Request) -> dict[str, Any]:
        # A view that pages one run's parts names it (self.run_shown): its creator may decide its requests.
        return _render_context(request, getattr(self, "run_shown", None))


class RunListApi(_PaginatedApi):
    """Runs the user may read, newest first, in the list representation (no legs, effects or approvals)."""

    @extend_schema(
        operation_id="runs_list",
        summary="List runs",
        description=f"Runs you may read (your own; every run with {VIEW_EVERY_RUN}), newest first, paginated, "
        "filterable by status, agent and creator (an empty value is no filter), and by metadata: "
        "`?metadata.KEY=VALUE` keeps the runs whose metadata has the string VALUE at its top-level KEY (KEY 1-100 "
        "letters, digits, '_', '.', ':' or '-'; several filters all apply). "
        "Each run is in the list representation, with its outcome and approvals: no input messages, pending "
        "approvals, legs or effects (GET the run for those).",
        parameters=[RunListFilterSerializer, WWW_AUTHENTICATE],
        responses={
            200: RunSerializer(many=True),
            400: error_answer("A filter is not valid (e.g. an unknown status)."),
            401: UNAUTHENTICATED,
            404: BAD_PAGE,
        },
    )
    def get(self, request: Request) -> Response:
        filters = validated_input(RunListFilterSerializer, request.query_params)
        runs = runs_readable_by(run_list(**filters), user=request.user)
        runs = runs.select_related("cancelled_by", "thread", "forked_from").prefetch_related(*RUN_LIST_PREFETCH)
        return self.paginated(request, _Presented(runs, _run_summary), RunSerializer)


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
        responses=json_body_answers({
            201: RunDetailSerializer,
            400: error_answer("Field errors, an unknown agent, malformed JSON, an Idempotency-Key that is not "
                              "1-255 visible ASCII characters."),
            409: error_answer(f"A run with this run_id exists, or {IDEMPOTENCY_KEY_IN_FLIGHT}."),
            422: IDEMPOTENCY_KEY_REUSED,
        }),
    )
    def post(self, request: Request) -> Response:
        def started() -> IdempotentAnswer:
            run = run_start(**validated_input(RunStartInputSerializer, request.data), user=request.user)
            return IdempotentAnswer(status=status.HTTP_201_CREATED, body=run_detail_json(run, request))

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
                   404: BAD_PAGE},
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
        description="The run's status and cumulative usage, its outcome (what it came to, in one sentence, and who "
        "decided it), every approval request it made with its verdict, the messages it started from, the approval "
        "requests it waits on (with the tokens a verdict must echo, for users who may decide), its legs (owner "
        "epochs) and effects (ledger).",
        parameters=[RUN_ID_PATH, WWW_AUTHENTICATE],
        responses={200: RunDetailSerializer, 401: UNAUTHENTICATED, 404: _NOT_FOUND},
    )
    def get(self, request: Request, run_id: str) -> Response:
        run = self.run_checked(request, run_id)
        return Response(run_detail_json(run, request))


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
        filters = validated_input(CheckpointListFilterSerializer, request.query_params)
        run = self.run_shown = self.run_checked(request, run_id)
        checkpoints = run_checkpoint_list(run=run, **filters)
        return self.paginated(request, checkpoints, AgentCheckpointSerializer)


class ApprovalDecideApi(_Api):
    permission_classes = [IsAuthenticated, CanDecideApprovals]

    @extend_schema(
        operation_id="runs_approvals_decide",
        summary="Approve or deny a pending tool call",
        description="Record a verdict once, as a reviewer, or as the run's creator when its agent lets its creator "
        "decide (`approvals_decided_by` of GET /api/agents/); never by the run's own creator when reviewers decide "
        "(four eyes, unless DEUZ_FOUR_EYES=0). The token must be the request's own, signed for this run. An approval "
        "may carry `edited_input`: the tool is then called with it instead (validated against its input_schema; the "
        "server signs the edited request). When every request of the suspended step has a verdict, the run is "
        "queued to resume.",
        request=ApprovalDecideInputSerializer,
        parameters=[RUN_ID_PATH, APPROVAL_ID_PATH, WWW_AUTHENTICATE],
        responses=json_body_answers({
            200: ApprovalRequestSerializer,
            400: error_answer("Field errors (an edited_input the tool's schema refuses, under edited_input), or "
                              "a token that does not verify for this request and run (it authorizes nothing)."),
            404: error_answer("No such run or approval request (told only to those who may decide)."),
            409: error_answer("Decided, expired, superseded, used, or the run was cancelled."),
        }, forbidden=f"Not a reviewer, nor the run's creator when its agent lets its creator decide (whether the run "
           f"exists or not), the run's creator when reviewers decide (four eyes), or {CSRF_REFUSED}."),
    )
    def post(self, request: Request, run_id: str, approval_id: str) -> Response:
        try:
            run = self.run_checked(request, run_id)
        except RunNotFound:
            if not approval_is_decidable_by(user=request.user):
                raise PermissionDenied(NOT_DECIDABLE) from None  # as for a run that exists: ids are not probed
            raise
        approval = approval_decide(
            run_id=run.run_id,
            approval_id=path_approval_id(run_id, approval_id),
            user=request.user,
            **validated_input(ApprovalDecideInputSerializer, request.data),
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
        responses=json_body_answers({
            200: RunDetailSerializer,
            400: error_answer("Field errors (a reason that is not a string or is too long, an unknown key)."),
            404: _NOT_FOUND,
            409: error_answer("The run is completed, failed or cancelled already."),
        }, forbidden=f"A run you may read but not cancel, or {CSRF_REFUSED}."),
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = self.run_checked(request, run_id)
        run = run_cancel(
            run_id=run.run_id, user=request.user, **validated_input(RunCancelInputSerializer, request.data)
        )
        return Response(run_detail_json(run, request))


class RunForkApi(_Api):
    permission_classes = [IsAuthenticated, CanReadRun, CanForkRun]

    @extend_schema(
        operation_id="runs_checkpoints_fork",
        summary="Start a new run from one of the run's checkpoints",
        description="A new run of the same agent, created by you, whose history is the run's latest checkpoint of "
        "that step, queued for a worker; its `forked_from` is `{\"run_id\", \"step_index\"}`. Its id is the body's "
        "`run_id`, or `<run_id>-fork-<n>`. A tool call the history holds with its result is not made again; one the "
        "checkpoint had not answered (waiting for a verdict, say) gets an error result instead, so no approval "
        "request or token of the original carries over. Its own approvals go to reviewers, whatever its agent "
        "says. The body is optional. Support and reviewers may fork.",
        request=RunForkInputSerializer,
        parameters=[RUN_ID_PATH, STEP_INDEX_PATH, WWW_AUTHENTICATE],
        responses=json_body_answers({
            201: RunDetailSerializer,
            400: error_answer("Field errors (a run_id that is not 1-200 of the run-id characters, an unknown key)."),
            404: error_answer("No such run, one you may not read, or no checkpoint of that step."),
            409: error_answer("A run with this run_id exists."),
        }, forbidden=f"A run you may read but not fork (support and reviewers fork), or {CSRF_REFUSED}."),
    )
    def post(self, request: Request, run_id: str, step_index: str) -> Response:
        origin = self.run_checked(request, run_id)
        fork = run_fork(
            run_id=origin.run_id, step_index=path_step_index(origin.run_id, step_index), user=request.user,
            new_run_id=validated_input(RunForkInputSerializer, request.data).get("run_id"),
        )
        return Response(run_detail_json(fork, request), status=status.HTTP_201_CREATED)
