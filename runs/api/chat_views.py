"""The AI SDK's chat wire (SERVICE.md, "The AI SDK chat wire"): what ``DefaultChatTransport`` of the ``ai`` package
sends and reconnects to, with Deuz as the backend and no adapter of the client's own.

  POST /api/chat                  a chat message (the next turn of the thread the chat id names, started for the user
                                  when there is none), or the verdicts of ``addToolApprovalResponse``; the answer is
                                  the turn's UI message stream (from its start, or from the verdicts on)
  GET  /api/chat/{id}/stream      the chat's active turn (queued or running) from its first chunk to its end; 204 when
                                  no turn is active
  GET  /api/chat/{id}/messages    the thread's turns as the UIMessage[] useChat starts with

A chat id is a thread id, and roles are the threads': who may not read a thread is told it does not exist (404); its
creator sends messages; who may read it and decide its approvals sends verdicts (approvals.chat). The UI message
stream is runs.wire.ui_messages's; these views parse, call one service, and open the stream.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.core.exceptions import PermissionDenied
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import APIException
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from approvals.chat import ChatVerdict, chat_verdicts_decide
from approvals.roles import run_approvals_decided_by
from runs.access import thread_is_writable_by
from runs.api.generic import ApiView, validated_input
from runs.api.idempotency import (
    HEADER,
    IDEMPOTENCY_KEY,
    IDEMPOTENCY_KEY_IN_FLIGHT,
    IDEMPOTENCY_KEY_REUSED,
    IDEMPOTENT_REPLAYED,
    REPLAYED_HEADER,
)
from runs.api.inputs import AgentField, path_thread_id
from runs.api.messages import ClosedSerializer, StrictCharField
from runs.api.permissions import CanReadThread, CanWriteThread
from runs.api.schema import CSRF_REFUSED, UNAUTHENTICATED, WWW_AUTHENTICATE, error_answer, json_body_answers
from runs.api.thread_views import TurnActiveSerializer
from runs.execution.continuation import run_continue
from runs.errors import ThreadNotFound
from runs.models import RUN_ID_VALIDATOR, Run, Thread
from runs.selectors import run_get, thread_get, thread_latest_turn
from runs.services.chat import chat_message_send
from runs.services.idempotency import IdempotentAnswer, idempotent_answer
from runs.wire.followers import FollowRefused, follow_open
from runs.wire.ui_messages import UIMessageStreamResponse, ui_approval_responses, ui_user_content
from runs.wire.ui_transcript import thread_ui_messages

__all__ = ["ChatMessageListApi", "ChatSendApi", "ChatStreamApi"]

_SCOPE = "POST /api/chat"
_NOT_FOUND = error_answer("No such chat (thread), or one you may not read.")
_ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[A-Za-z0-9._:-]+$"}
_CHAT_ID_PATH = OpenApiParameter("chat_id", _ID_SCHEMA, OpenApiParameter.PATH,
                                 description="The chat's id: the id of its thread; one the user may not read is "
                                 "answered 404 like an unknown one.")
_UI_STREAM = OpenApiResponse(
    OpenApiTypes.STR,
    description="The turn's UI message stream (the `ai` package's, header `x-vercel-ai-ui-message-stream: v1`): one "
    "`data: <chunk as JSON>` per chunk, each valid against its uiMessageChunkSchema, ending with `data: [DONE]`. "
    "`start` names the turn's run as the message id; Deuz's own parts are `data-deuz-<type>` chunks; a "
    "`data-deuz-approval` chunk beside each `tool-approval-request` says who may decide it. No approval token "
    "travels.",
    examples=[OpenApiExample("The start of a turn", media_type="text/event-stream", response_only=True, value=(
        'data: {"type":"start","messageId":"run_20260101_abc"}\n\ndata: {"type":"start-step"}\n\n'
        'data: {"type":"text-start","id":"text-2"}\n\ndata: {"type":"text-delta","id":"text-2","delta":"Let me "}\n\n'
    ))],
)

_UI_MESSAGE = {
    "type": "object",
    "description": "A UIMessage as useChat holds it. Only the last message is read: a user message's text and file "
    "parts (a file as a base64 `data:` URL), or an assistant message's tool parts in state `approval-responded`.",
    "properties": {
        "id": {"type": "string"},
        "role": {"type": "string", "enum": ["user", "assistant", "system"]},
        "parts": {"type": "array", "items": {"type": "object", "properties": {"type": {"type": "string"}},
                                             "required": ["type"], "additionalProperties": True}},
        "metadata": {},
    },
    "required": ["role", "parts"],
    "additionalProperties": True,
}


@extend_schema_field({"type": "array", "minItems": 1, "items": _UI_MESSAGE})
class _UIMessagesField(serializers.ListField):
    """``messages``: the UIMessages useChat sends (a front end sends only the last: the thread holds the history)."""

    child = serializers.DictField()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_empty=False, **kwargs)


class ChatInputSerializer(ClosedSerializer):
    """The body DefaultChatTransport sends, plus ``agent`` for a new chat."""

    id = StrictCharField(min_length=1, max_length=200, trim_whitespace=False, validators=[RUN_ID_VALIDATOR],
                         help_text="The chat's id: its thread's. A new id starts a thread with `agent`, for you.")
    messages = _UIMessagesField(help_text="The chat's UIMessages; only the last is read.")
    trigger = serializers.ChoiceField(choices=["submit-message", "regenerate-message"],
                                      help_text="`regenerate-message` is refused (422): a turn is never rewritten.")
    messageId = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=200,  # noqa: N815
                                trim_whitespace=False,
                                help_text="The message useChat continues (an approval's answer): not read.")
    agent = AgentField(required=False, help_text="The agent of a new chat; when given for an existing chat, it must "
                       "be the thread's (else 409).")


class TurnNotRewritable(APIException):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = ("A turn is never rewritten: regenerate-message is refused. Send a new message instead.")


class ChatUnprocessable(APIException):
    """A well-formed body that holds nothing Deuz can act on (the document cannot say which UIMessage is last, so a
    body it allows is refused as unprocessable, not as malformed), with field errors as a 400 has them."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.detail = {"detail": message, field: [message]}


def _messages_error(message: str) -> ChatUnprocessable:
    return ChatUnprocessable("messages", message)


class _ChatApi(ApiView):
    """A chat view: the thread of the chat id, and the UI message stream of a turn."""

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # A UI message stream is asked for with any Accept (fetch sends */*, an EventSource text/event-stream); the
        # JSON renderer renders the errors and lists whatever the client accepts.
        return super().perform_content_negotiation(request, force=True)

    def thread_checked(self, request: Request, chat_id: str) -> Thread:
        thread = thread_get(thread_id=path_thread_id(chat_id))
        self.check_object_permissions(request, thread)
        return thread

    def ui_stream(self, request: Request, run: Run, *, cursor: int) -> Any:
        """The turn's UI message stream after seq ``cursor`` (-1: from its start), tailed to its end."""
        try:
            follow = async_to_sync(follow_open)(run_id=run.run_id, cursor=str(cursor),
                                                authenticate=lambda: request.user, kind="sse",
                                                continuation=run_continue)
        except FollowRefused as refusal:
            return Response({"detail": refusal.detail}, status=refusal.status)
        return UIMessageStreamResponse(follow, approvals_decided_by=run_approvals_decided_by(run))


class ChatSendApi(_ChatApi):
    permission_classes = [IsAuthenticated, CanReadThread]

    @extend_schema(
        operation_id="chat_send",
        summary="Send a chat message, or answer an approval, as the AI SDK's DefaultChatTransport does",
        description="The body of `DefaultChatTransport.sendMessages`. When the last message is the user's, its text "
        "and file parts are the thread's next turn (a chat id that names no thread starts one with `agent`, for you), "
        "and the answer is that turn's UI message stream from its start. When it is the assistant's with tool parts "
        "in state `approval-responded` (`addToolApprovalResponse`), those approvals are decided as you (a reviewer, "
        "or the run's creator when its agent lets its creator decide) and the answer is the turn's stream from the "
        "verdicts on. Send only the last message (the transport's `prepareSendMessagesRequest`): the thread holds "
        "the history. With an `Idempotency-Key`, a repeat starts nothing and gets the same stream again from where "
        "the first answer began.",
        request=ChatInputSerializer,
        parameters=[IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED, WWW_AUTHENTICATE],
        responses={(200, "text/event-stream"): _UI_STREAM, **json_body_answers({
            400: error_answer("Field errors (a body that is not the transport's), malformed JSON, a malformed "
                              "Idempotency-Key."),
            404: error_answer("No such chat (thread) you may read, or an approval it does not hold."),
            409: OpenApiResponse(TurnActiveSerializer, description="A turn is in progress (`active_run_id`), "
                                 "another agent than the chat's, an approval already decided, or "
                                 f"{IDEMPOTENCY_KEY_IN_FLIGHT}."),
            422: error_answer("`trigger` is regenerate-message (a turn is never rewritten); a body that holds "
                              "nothing to act on, with field errors (a last user message without text or a data: "
                              "file, an assistant message with no answered approval, a new chat without its "
                              "`agent`); or the Idempotency-Key was sent before with another body."),
            429: error_answer("You have as many streams open as you may."),
        }, forbidden="A chat you may read but did not start (a message), approvals you may not decide (a verdict: "
           f"nothing is decided), or {CSRF_REFUSED}.")},
    )
    def post(self, request: Request) -> Any:
        given = validated_input(ChatInputSerializer, request.data)
        if given["trigger"] == "regenerate-message":
            raise TurnNotRewritable()
        thread = Thread.objects.filter(thread_id=given["id"]).first()
        if thread is not None:
            self.check_object_permissions(request, thread)  # 404 for a chat the user may not read
        last = given["messages"][-1]
        if last.get("role") == "assistant":
            answer = self._verdicts(request, thread, given, last)
        elif last.get("role") == "user":
            answer = self._message(request, thread, given, last)
        else:
            raise _messages_error("The last message must be the user's (a message) or the assistant's (approvals "
                                  "answered with addToolApprovalResponse).")
        key = request.headers.get(HEADER)
        answered = answer() if key is None else idempotent_answer(user=request.user, key=key, scope=_SCOPE,
                                                                  body=request.data, answer=answer)
        response = self.ui_stream(request, run_get(run_id=answered.body["run_id"]), cursor=answered.body["cursor"])
        if answered.is_replay:
            response[REPLAYED_HEADER] = "true"
        return response

    def _message(self, request: Request, thread: Thread | None, given: dict[str, Any], last: dict[str, Any]):
        try:
            content = ui_user_content(last)
        except ValueError as exc:
            raise _messages_error(str(exc)) from None
        if thread is not None and not thread_is_writable_by(thread, user=request.user):
            raise PermissionDenied(CanWriteThread.message)
        if thread is None and not given.get("agent"):
            raise ChatUnprocessable("agent", "A new chat (an id that names no thread yet) needs its agent.")

        def sent() -> IdempotentAnswer:
            run = chat_message_send(chat_id=given["id"], content=content, agent=given.get("agent"), user=request.user)
            return IdempotentAnswer(status=status.HTTP_200_OK, body={"run_id": run.run_id, "cursor": -1})

        return sent

    def _verdicts(self, request: Request, thread: Thread | None, given: dict[str, Any], last: dict[str, Any]):
        try:
            verdicts = [ChatVerdict(**verdict) for verdict in ui_approval_responses(last)]
        except ValueError as exc:
            raise _messages_error(str(exc)) from None
        if not verdicts:
            raise _messages_error("The last message is the assistant's, with no tool part in state "
                                  "approval-responded: there is nothing to send.")
        if thread is None:
            raise ThreadNotFound(given["id"])

        def decided() -> IdempotentAnswer:
            run, cursor = chat_verdicts_decide(thread=thread, verdicts=verdicts, user=request.user)
            return IdempotentAnswer(status=status.HTTP_200_OK, body={"run_id": run.run_id, "cursor": cursor})

        return decided


class ChatStreamApi(_ChatApi):
    permission_classes = [IsAuthenticated, CanReadThread]

    @extend_schema(
        operation_id="chat_stream",
        summary="Reconnect to the chat's active turn (DefaultChatTransport.reconnectToStream)",
        description="The UI message stream of the chat's active turn (queued or running), replayed from its first "
        "chunk and tailed to its end: what `useChat({resume: true})` asks for after a reload. 204 when no turn is "
        "active (a turn suspended on an approval is not: GET the messages instead).",
        parameters=[_CHAT_ID_PATH, WWW_AUTHENTICATE],
        responses={(200, "text/event-stream"): _UI_STREAM,
                   204: OpenApiResponse(description="No turn is active."),
                   401: UNAUTHENTICATED, 404: _NOT_FOUND,
                   429: error_answer("You have as many streams open as you may.")},
    )
    def get(self, request: Request, chat_id: str) -> Any:
        thread = self.thread_checked(request, chat_id)
        run = thread_latest_turn(thread=thread)
        if run is None or run.status not in (Run.Status.QUEUED, Run.Status.RUNNING):
            return Response(status=status.HTTP_204_NO_CONTENT)
        return self.ui_stream(request, run, cursor=-1)


class ChatMessageListApi(_ChatApi):
    permission_classes = [IsAuthenticated, CanReadThread]

    @extend_schema(
        operation_id="chat_messages",
        summary="The chat's messages, for useChat's initial messages",
        description="Every turn of the chat's thread, first first, as UIMessages: the user message it was sent (id "
        "`<run id>:user`) and the assistant's answer (id the turn's run id), built by the same mapping as the "
        "stream, so a reload shows what the stream showed. An active turn (queued or running) has its user message "
        "only: `useChat({resume: true})` rebuilds its answer from the stream endpoint's replay.",
        parameters=[_CHAT_ID_PATH, WWW_AUTHENTICATE],
        responses={200: OpenApiResponse({"type": "array", "items": _UI_MESSAGE}, description="The UIMessages."),
                   401: UNAUTHENTICATED, 404: _NOT_FOUND},
    )
    def get(self, request: Request, chat_id: str) -> Response:
        thread = self.thread_checked(request, chat_id)
        return Response(thread_ui_messages(thread=thread))
