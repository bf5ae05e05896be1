"""The threads API (SERVICE.md, "Conversations"): start a thread, list and read threads, add a message (a new turn).

Roles are those of runs (runs.access): a thread's creator owns it and adds its messages; support and reviewers read
every thread; a thread someone may not read is a 404, exactly as an unknown one. Each view parses its input, calls
one service or reads through selectors, and renders.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from runs.access import VIEW_EVERY_RUN, threads_readable_by
from runs.api.generic import ApiView, PaginatedApiView, validated_input
from runs.api.idempotency import (
    IDEMPOTENCY_KEY,
    IDEMPOTENCY_KEY_IN_FLIGHT,
    IDEMPOTENCY_KEY_REUSED,
    IDEMPOTENT_REPLAYED,
    idempotent_response,
)
from runs.api.inputs import ThreadMessageInputSerializer, ThreadStartInputSerializer, path_thread_id
from runs.api.outputs import ErrorSerializer, RunDetailSerializer, ThreadDetail, ThreadDetailSerializer, ThreadSerializer
from runs.api.permissions import CanReadThread, CanWriteThread
from runs.api.schema import (
    BAD_PAGE,
    CSRF_REFUSED,
    THREAD_ID_PATH,
    UNAUTHENTICATED,
    WWW_AUTHENTICATE,
    error_answer,
    json_body_answers,
)
from runs.api.views import run_detail_json
from runs.models import Thread
from runs.selectors import thread_get, thread_list, thread_messages, thread_turn_list
from runs.services.idempotency import IdempotentAnswer
from runs.services.threads import thread_message_add, thread_start

__all__ = ["ThreadCollectionApi", "ThreadDetailApi", "ThreadMessageAddApi"]

_NOT_FOUND = error_answer("No such thread, or one you may not read.")


class TurnActiveSerializer(ErrorSerializer):
    """A thread whose last turn is not over: which run it is."""

    active_run_id = serializers.CharField(
        required=False, help_text="The run of the turn in progress (only when a turn is): follow it, then send again.")


def _thread_detail(thread: Thread) -> ThreadDetail:
    return ThreadDetail(thread=thread, turns=list(thread_turn_list(thread=thread)),
                        messages=thread_messages(thread=thread))


class _ThreadApi(ApiView):
    def thread_checked(self, request: Request, thread_id: str) -> Thread:
        """The thread of the URL, once the view's permission classes allow this user to act on it."""
        thread = thread_get(thread_id=path_thread_id(thread_id))
        self.check_object_permissions(request, thread)
        return thread


class ThreadCollectionApi(PaginatedApiView, _ThreadApi):
    """``/api/threads/``: GET lists the threads the user may read, POST starts one."""

    @extend_schema(
        operation_id="threads_list",
        summary="List threads",
        description=f"Threads you may read (your own; every thread with {VIEW_EVERY_RUN}), latest activity (their "
        "last turn added) first, paginated. GET a thread for its turns and messages.",
        parameters=[WWW_AUTHENTICATE],
        responses={200: ThreadSerializer(many=True), 401: UNAUTHENTICATED, 404: BAD_PAGE},
    )
    def get(self, request: Request) -> Response:
        return self.paginated(request, threads_readable_by(thread_list(), user=request.user), ThreadSerializer)

    @extend_schema(
        operation_id="threads_start",
        summary="Start a thread",
        description="A conversation with a registered agent, owned by you. It has no turn until its first message "
        "(POST /api/threads/{thread_id}/messages/).",
        request=ThreadStartInputSerializer,
        parameters=[WWW_AUTHENTICATE],
        responses=json_body_answers({
            201: ThreadDetailSerializer,
            400: error_answer("Field errors, an unknown agent, malformed JSON."),
            409: error_answer("A thread with this thread_id exists."),
        }),
    )
    def post(self, request: Request) -> Response:
        thread = thread_start(**validated_input(ThreadStartInputSerializer, request.data), user=request.user)
        return Response(ThreadDetailSerializer(_thread_detail(thread)).data, status=status.HTTP_201_CREATED)


class ThreadDetailApi(_ThreadApi):
    permission_classes = [IsAuthenticated, CanReadThread]

    @extend_schema(
        operation_id="threads_retrieve",
        summary="One thread with its turns and messages",
        description="The thread, its turns (each a run: its id, status and when it started), and the conversation "
        "so far: the latest turn's latest messages, tool calls and results included.",
        parameters=[THREAD_ID_PATH, WWW_AUTHENTICATE],
        responses={200: ThreadDetailSerializer, 401: UNAUTHENTICATED, 404: _NOT_FOUND},
    )
    def get(self, request: Request, thread_id: str) -> Response:
        thread = self.thread_checked(request, thread_id)
        return Response(ThreadDetailSerializer(_thread_detail(thread)).data)


class ThreadMessageAddApi(_ThreadApi):
    permission_classes = [IsAuthenticated, CanReadThread, CanWriteThread]

    @extend_schema(
        operation_id="threads_messages_add",
        summary="Send the thread's next message: a new turn",
        description="Queue the thread's next turn: a run of its agent on the thread's history (the previous turn's "
        "final messages, tool calls and results included; an open call of a cancelled or failed turn is settled as "
        "an error result) plus this user message. The client never sends the history. Refused with the active run "
        "while a turn is queued, running, suspended or needs review. Follow the new run's events for its answer. "
        "With an `Idempotency-Key`, a repeat of the request starts nothing and gets the first answer.",
        request=ThreadMessageInputSerializer,
        parameters=[THREAD_ID_PATH, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED, WWW_AUTHENTICATE],
        responses=json_body_answers({
            201: RunDetailSerializer,
            400: error_answer("Field errors, malformed JSON, an Idempotency-Key that is not 1-255 visible ASCII "
                              "characters."),
            404: _NOT_FOUND,
            409: OpenApiResponse(TurnActiveSerializer, description="A turn is in progress (its run is "
                                 f"`active_run_id`), a run with this run_id exists, or {IDEMPOTENCY_KEY_IN_FLIGHT}."),
            422: IDEMPOTENCY_KEY_REUSED,
        }, forbidden=f"A thread you may read but did not start, or {CSRF_REFUSED}."),
    )
    def post(self, request: Request, thread_id: str) -> Response:
        thread = self.thread_checked(request, thread_id)

        def added() -> IdempotentAnswer:
            run = thread_message_add(thread_id=thread.thread_id, user=request.user,
                                     **validated_input(ThreadMessageInputSerializer, request.data))
            return IdempotentAnswer(status=status.HTTP_201_CREATED, body=run_detail_json(run, request))

        return idempotent_response(request, scope="POST /api/threads/{thread_id}/messages/", answer=added,
                                   body={"thread_id": thread.thread_id, "body": request.data})
