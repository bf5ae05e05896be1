"""The AI SDK's UI message stream (the ``ai`` package's ``uiMessageChunkSchema``, pinned in package.json): the one
place that maps a run's stream parts to its chunks (SERVICE.md, "The AI SDK chat wire"), and renders a follower's
frames as the stream's Server-Sent Events.

Every part of a run maps to chunks by ``ui_chunks(part, seq=..., state=...)``, a function of the part and a small
per-stream ``UIStreamState``; the stream opens with ``ui_chunks_start`` and closes with ``ui_chunks_end``:

=========================  ===========================================================================================
Deuz part                  UI message chunks
=========================  ===========================================================================================
start                      ``start`` (``messageId`` the run id), sent once when the stream opens, also from a cursor
step-start / step-finish   ``start-step`` / ``finish-step``
text-delta                 ``text-delta``, with ``text-start`` before a text's first delta and ``text-end`` after its last
                           (the id is ``text-<seq of the first delta>``, the same on every replay)
tool-call                  ``tool-input-available`` (``tool-input-error`` when its input could not be used)
tool-approval-request      ``tool-approval-request`` (``approvalId`` the approval's id, never its token), then
                           ``data-deuz-approval``: who may decide it (``approvals_decided_by``, given by the caller)
tool-approval-verdict      ``data-deuz-tool-approval-verdict``
tool-result                ``tool-output-available``; ``tool-output-error`` when ``is_error``; ``tool-output-denied``
                           after a verdict that denied the call
finish                     ``finish``; reasons stop, length, content-filter, error as they are; suspended is
                           tool-calls, max-steps length, cancelled, aborted and stop-condition other; a
                           ``data-deuz-finish`` before it names Deuz's reason whenever the two differ
error                      ``error`` (``errorText`` is ``name: message``), then a ``finish`` (error) if the stream ends
                           there; a retryable error a ``retry`` follows is ``data-deuz-error`` instead, since an
                           ``error`` chunk ends useChat's reading while the run goes on
recovery, retry,           ``data-deuz-<type>``, the part's fields as its data
cancelled, others
a sub-agent's part         its tool calls are tool parts of their own (``dynamic: true`` on their chunks), each after a
(``agent_path``)           ``data-deuz-sub-agent`` naming the call and the agent path; its text is transient
                           ``data-deuz-text-delta`` chunks and, once done, one ``data-deuz-text``; its steps transient
                           ``data-deuz-step-start`` / ``-step-finish``; anything else ``data-deuz-<type>`` (a
                           sub-agent's error or finish is its parent's tool result, never the message's)
=========================  ===========================================================================================

A recovery means the restarted step's earlier chunks are void; a front end that shows them drops the parts between
that step's ``step-start`` and the ``data-deuz-recovery``. No other module knows these chunk names.

The other way, and for a reload: ``ui_user_content`` reads the text and file parts of a UIMessage a client sends as a
Deuz user message's content, ``ui_approval_responses`` the verdicts of an assistant UIMessage's tool parts in state
``approval-responded`` (``addToolApprovalResponse``); ``ui_user_message`` and ``ui_assistant_message`` build the
UIMessages of a finished or running turn (``useChat``'s initial messages), the assistant's by folding the turn's chunks
as the ``ai`` package's ``readUIMessageStream`` does (``ui_message_fold``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

from runs.runtime.codec import encode_value
from runs.runtime.types import StreamPart
from runs.wire.followers import Follow, FollowResponse, FrameKind

__all__ = [
    "APPROVALS_DECIDED_BY",
    "UI_MESSAGE_STREAM_HEADERS",
    "UIChunk",
    "UIMessage",
    "UIMessageStreamResponse",
    "UIStreamState",
    "ui_approval_responses",
    "ui_assistant_message",
    "ui_chunks",
    "ui_chunks_end",
    "ui_chunks_start",
    "ui_message_events",
    "ui_message_fold",
    "ui_user_content",
    "ui_user_message",
]

#: One chunk of the UI message stream (a JSON object with a ``type``).
UIChunk = dict[str, Any]

#: A UIMessage as JSON: ``{"id", "role", "parts"}``.
UIMessage = dict[str, Any]

#: Who may decide a run's approvals (AgentDefinition.approvals_decided_by).
APPROVALS_DECIDED_BY = ("reviewers", "creator")

#: The headers of a UI message stream response, as the ``ai`` package's own UI_MESSAGE_STREAM_HEADERS (the
#: content type is the response's).
UI_MESSAGE_STREAM_HEADERS = {
    "x-vercel-ai-ui-message-stream": "v1",
    "Cache-Control": "private, no-store",  # run data: never kept by a cache or a proxy
    "X-Accel-Buffering": "no",  # proxies must not hold chunks back
}

# Deuz's finish reasons (runs.runtime.types.FINISH_REASONS) as the AI SDK's.
_FINISH_REASONS = {
    "stop": "stop", "length": "length", "content-filter": "content-filter", "error": "error",
    "suspended": "tool-calls", "max-steps": "length",
    "cancelled": "other", "aborted": "other", "stop-condition": "other",
}

# A sub-agent's parts that only show progress: sent, but not kept in the message.
_TRANSIENT = {"step-start", "step-finish"}

_KEEPALIVE_EVERY = 15  # idle ticks of a second, as the events view
_DONE = "data: [DONE]\n\n"


@dataclass(kw_only=True)
class UIStreamState:
    """What one UI message stream remembers between parts: the message it builds, the texts it has open, the calls
    a verdict denied, a retryable error waiting to learn whether a retry follows."""

    message_id: str
    approvals_decided_by: str = "reviewers"
    is_started: bool = False
    text_id: str | None = None
    agent_text: dict[str, Any] | None = None  # {"agent_path", "text"} of a sub-agent's open text
    denied_calls: set[str] = field(default_factory=set)
    asked_calls: list[str] = field(default_factory=list)  # calls whose approval request has no answer yet
    pending_error: StreamPart | None = None
    has_failed: bool = False  # an error chunk was sent and no finish after it

    def __post_init__(self) -> None:
        if self.approvals_decided_by not in APPROVALS_DECIDED_BY:
            raise ValueError(f"approvals_decided_by must be one of {APPROVALS_DECIDED_BY}; "
                             f"got {self.approvals_decided_by!r}.")


def ui_chunks_start(state: UIStreamState) -> list[UIChunk]:
    """The stream's first chunk, ``start`` with the run id as the message's id (once per stream)."""
    if state.is_started:
        return []
    state.is_started = True
    return [{"type": "start", "messageId": state.message_id}]


def ui_chunks_end(state: UIStreamState) -> list[UIChunk]:
    """The chunks that close the stream: open texts ended, an error no retry followed, a failed run's finish."""
    chunks = _close_texts(state)
    if state.pending_error is not None:
        chunks.append(_error(state, state.pending_error))
        state.pending_error = None
    if state.has_failed:
        chunks.append(_finish(state, "error"))
    return chunks


def ui_chunks(part: StreamPart, *, seq: int | None, state: UIStreamState) -> list[UIChunk]:
    """The UI message chunks of one stream part (``seq`` its place in the journal, None for a follower's own error
    part); ``state`` is updated."""
    kind = part.get("type")
    agent_path = part.get("agent_path")
    chunks: list[UIChunk] = []
    if state.pending_error is not None:
        error, state.pending_error = state.pending_error, None
        chunks.append(_data("error", error) if kind == "retry" else _error(state, error))
    if kind == "text-delta":
        return chunks + _text_delta(part, seq=seq, state=state, agent_path=agent_path)
    chunks += _close_texts(state)
    if kind == "tool-call":
        return chunks + _tool_call(part, agent_path)
    if kind == "tool-approval-request":
        return chunks + _approval_request(part.get("approval") or {}, state)
    if kind == "tool-approval-verdict":
        _answered(state, part.get("tool_call_id"))
        if not part.get("approved"):
            state.denied_calls.add(part.get("tool_call_id"))
        return chunks + [_data(kind, part)]
    if kind == "tool-result":
        _answered(state, part.get("tool_call_id"))
        return chunks + [_tool_result(part, state, agent_path)]
    if kind == "cancelled":  # the cancel withdrew every request still open: none is left to answer
        withdrawn, state.asked_calls = state.asked_calls, []
        return chunks + [_data(kind, part)] + [{"type": "tool-output-denied", "toolCallId": call_id}
                                               for call_id in withdrawn]
    if agent_path:  # a sub-agent's step, finish, error...: never the message's own
        return chunks + [_data(kind, part, transient=kind in _TRANSIENT)]
    if kind == "start":
        return chunks + ui_chunks_start(state)
    if kind == "step-start":
        return chunks + [{"type": "start-step"}]
    if kind == "step-finish":
        return chunks + [{"type": "finish-step"}]
    if kind == "finish":
        reason = part.get("finish_reason")
        if _FINISH_REASONS.get(reason) != reason:
            chunks.append(_data(kind, part))
        return chunks + [_finish(state, _FINISH_REASONS.get(reason, "other"))]
    if kind == "error":
        if part.get("retryable"):
            state.pending_error = part  # a retry part may follow (then the run goes on) or nothing (it failed)
            return chunks
        return chunks + [_error(state, part)]
    return chunks + [_data(str(kind), part)]  # recovery, retry, cancelled, and parts this mapping has no name for


def _data(kind: str, part: StreamPart, *, transient: bool = False) -> UIChunk:
    chunk: UIChunk = {"type": f"data-deuz-{kind}", "data": {key: value for key, value in part.items() if key != "type"}}
    if transient:
        chunk["transient"] = True
    return chunk


def _text_delta(part: StreamPart, *, seq: int | None, state: UIStreamState, agent_path: Any) -> list[UIChunk]:
    text = part.get("text", "")
    if agent_path:
        chunks = _close_texts(state, keep_agent_path=agent_path)
        if state.agent_text is None:
            state.agent_text = {"agent_path": agent_path, "text": ""}
        state.agent_text["text"] += text
        return chunks + [_data("text-delta", part, transient=True)]
    chunks = _close_texts(state, keep_own=True)
    if state.text_id is None:
        state.text_id = f"text-{seq if seq is not None else 'unsequenced'}"
        chunks.append({"type": "text-start", "id": state.text_id})
    return chunks + [{"type": "text-delta", "id": state.text_id, "delta": text}]


def _close_texts(state: UIStreamState, *, keep_own: bool = False, keep_agent_path: Any = None) -> list[UIChunk]:
    """End the open texts, the run's own (``text-end``) unless ``keep_own``, and a sub-agent's (its whole text as
    ``data-deuz-text``) unless it is ``keep_agent_path``'s."""
    chunks = []
    if state.text_id is not None and not keep_own:
        chunks.append({"type": "text-end", "id": state.text_id})
        state.text_id = None
    if state.agent_text is not None and state.agent_text["agent_path"] != keep_agent_path:
        chunks.append(_data("text", state.agent_text))
        state.agent_text = None
    return chunks


def _sub_agent(agent_path: Any) -> dict[str, Any]:
    return {"dynamic": True} if agent_path else {}


def _tool_call(part: StreamPart, agent_path: Any) -> list[UIChunk]:
    call = {"toolCallId": part["tool_call_id"], "toolName": part["tool_name"], "input": part.get("input"),
            **_sub_agent(agent_path)}
    chunks = [_data("sub-agent", {"tool_call_id": part["tool_call_id"], "agent_path": agent_path})] if agent_path else []
    if "input_error" in part:
        return chunks + [{"type": "tool-input-error", **call, "errorText": str(part["input_error"])}]
    return chunks + [{"type": "tool-input-available", **call}]


def _approval_request(approval: dict[str, Any], state: UIStreamState) -> list[UIChunk]:
    # No token: a verdict from the chat is decided as the signed-in user (SERVICE.md), never by bearer token.
    about = {key: approval[key] for key in ("approval_id", "tool_call_id", "tool_name", "agent_path") if key in approval}
    state.asked_calls.append(approval["tool_call_id"])
    return [
        {"type": "tool-approval-request", "approvalId": approval["approval_id"], "toolCallId": approval["tool_call_id"]},
        _data("approval", {**about, "approvals_decided_by": state.approvals_decided_by}),
    ]


def _answered(state: UIStreamState, call_id: Any) -> None:
    if call_id in state.asked_calls:
        state.asked_calls.remove(call_id)


def _tool_result(part: StreamPart, state: UIStreamState, agent_path: Any) -> UIChunk:
    call_id = part["tool_call_id"]
    if call_id in state.denied_calls:
        state.denied_calls.discard(call_id)
        return {"type": "tool-output-denied", "toolCallId": call_id}
    if part.get("is_error"):
        return {"type": "tool-output-error", "toolCallId": call_id, "errorText": _as_text(part.get("output")),
                **_sub_agent(agent_path)}
    return {"type": "tool-output-available", "toolCallId": call_id, "output": part.get("output"),
            **_sub_agent(agent_path)}


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(encode_value(value), ensure_ascii=False)


def _error(state: UIStreamState, part: StreamPart) -> UIChunk:
    state.has_failed = True
    error = part.get("error") or {}
    name, message = error.get("name"), error.get("message", "")
    return {"type": "error", "errorText": f"{name}: {message}" if name else str(message)}


def _finish(state: UIStreamState, reason: str) -> UIChunk:
    state.has_failed = False
    return {"type": "finish", "finishReason": reason}


def _event(chunks: list[UIChunk]) -> str:
    # One write for all the chunks of a part: a client never gets half of a part's chunks.
    return "".join(
        f"data: {json.dumps(encode_value(chunk), ensure_ascii=False, separators=(',', ':'))}\n\n" for chunk in chunks)


async def ui_message_events(follow: Follow, *, approvals_decided_by: str) -> AsyncIterator[str]:
    """The UI message stream of a Follow (``follow_open``), as Server-Sent Events: ``start`` at once (also from a
    cursor, so the bytes begin at once and a client continuing its message gets the same id), each part's chunks
    from the follower's cursor on, ``: keep-alive`` comments while idle, and ``data: [DONE]`` at the end."""
    state = UIStreamState(message_id=follow.run_id, approvals_decided_by=approvals_decided_by)
    yield _event(ui_chunks_start(state))
    idle = 0
    async for frame in follow.frames():
        if frame.kind is FrameKind.PART:
            if chunks := ui_chunks(frame.part, seq=frame.seq, state=state):
                yield _event(chunks)
        elif frame.kind is FrameKind.IDLE:
            idle += 1
            if idle % _KEEPALIVE_EVERY == 0:
                yield ": keep-alive\n\n"
        elif frame.kind is FrameKind.FAILED:  # the follower's own failure: the stream ends, whatever the run does
            yield _event(ui_chunks(frame.part, seq=None, state=state))
            break
        else:  # DONE
            break
    yield _event(ui_chunks_end(state)) + _DONE


class UIMessageStreamResponse(FollowResponse):
    """A Follow's UI message stream as a response, with its headers; the Follow is closed with the response."""

    def __init__(self, follow: Follow, *, approvals_decided_by: str) -> None:
        super().__init__(follow, ui_message_events(follow, approvals_decided_by=approvals_decided_by),
                         headers=UI_MESSAGE_STREAM_HEADERS)


# --------------------------------------------------------------------------- UIMessages: a reload, and what clients send


def ui_assistant_message(
    parts: Iterable[tuple[int, StreamPart]], *, message_id: str, approvals_decided_by: str = "reviewers",
) -> UIMessage:
    """The assistant UIMessage of a turn's journal (``(seq, part)`` pairs, in order): its chunks as a stream sends
    them, folded as ``readUIMessageStream`` folds them."""
    state = UIStreamState(message_id=message_id, approvals_decided_by=approvals_decided_by)
    chunks = ui_chunks_start(state)
    for seq, part in parts:
        chunks += ui_chunks(part, seq=seq, state=state)
    return ui_message_fold(chunks + ui_chunks_end(state), message_id=message_id)


def ui_message_fold(chunks: Iterable[UIChunk], *, message_id: str) -> UIMessage:
    """The assistant UIMessage the ``ai`` package's ``readUIMessageStream`` builds from ``chunks`` (those this module
    sends), as JSON: keys the package leaves undefined are absent."""
    message: UIMessage = {"id": message_id, "role": "assistant", "parts": []}
    texts: dict[str, dict[str, Any]] = {}
    for chunk in chunks:
        kind = chunk["type"]
        if kind == "start":
            message["id"] = chunk.get("messageId", message["id"])
        elif kind == "start-step":
            message["parts"].append({"type": "step-start"})
        elif kind == "finish-step":
            texts.clear()
        elif kind == "text-start":
            texts[chunk["id"]] = {"type": "text", "text": "", "state": "streaming"}
            message["parts"].append(texts[chunk["id"]])
        elif kind == "text-delta":
            texts[chunk["id"]]["text"] += chunk["delta"]
        elif kind == "text-end":
            texts.pop(chunk["id"])["state"] = "done"
        elif kind.startswith("tool-"):
            _fold_tool(message["parts"], chunk)
        elif kind.startswith("data-") and not chunk.get("transient"):
            message["parts"].append(dict(chunk))
    return message


def _fold_tool(parts: list[dict[str, Any]], chunk: UIChunk) -> None:
    kind, call_id = chunk["type"], chunk["toolCallId"]
    part = next((part for part in parts if part.get("toolCallId") == call_id), None)
    if kind in ("tool-input-available", "tool-input-error"):
        if part is None:
            part = ({"type": "dynamic-tool", "toolName": chunk["toolName"]} if chunk.get("dynamic")
                    else {"type": f"tool-{chunk['toolName']}"})
            part["toolCallId"] = call_id
            parts.append(part)
        for key in ("output", "errorText", "rawInput", "input"):
            part.pop(key, None)
        if kind == "tool-input-available":
            part.update(state="input-available", input=chunk.get("input"))
        elif part["type"] == "dynamic-tool":
            part.update(state="output-error", input=chunk.get("input"), errorText=chunk["errorText"])
        else:
            part.update(state="output-error", rawInput=chunk.get("input"), errorText=chunk["errorText"])
        return
    if part is None:  # readUIMessageStream fails on it too ("No tool invocation found")
        raise ValueError(f"A {kind} chunk names a tool call the message does not hold: {call_id!r}.")
    if kind == "tool-approval-request":
        part.update(state="approval-requested", approval={"id": chunk["approvalId"]})
    elif kind == "tool-output-denied":
        part["state"] = "output-denied"
    elif kind == "tool-output-available":
        part.pop("errorText", None)
        if part["type"] != "dynamic-tool":
            part.pop("rawInput", None)
        part.update(state="output-available", output=chunk.get("output"))
    elif kind == "tool-output-error":
        part.pop("output", None)
        part.update(state="output-error", errorText=chunk["errorText"])


def ui_user_message(content: str | list[dict[str, Any]], *, message_id: str) -> UIMessage:
    """A Deuz user message's content as a UIMessage: its text, and its images and files as data URLs."""
    parts: list[dict[str, Any]] = []
    for part in [{"type": "text", "text": content}] if isinstance(content, str) else content:
        if part.get("type") == "text":
            parts.append({"type": "text", "text": part.get("text", "")})
        elif part.get("type") in ("image", "file") and isinstance(part.get("data"), bytes):
            media_type = part.get("media_type") or "application/octet-stream"
            url = f"data:{media_type};base64,{base64.b64encode(part['data']).decode('ascii')}"
            parts.append({"type": "file", "mediaType": media_type, "url": url,
                          **({"filename": part["filename"]} if part.get("filename") else {})})
    return {"id": message_id, "role": "user", "parts": parts}


_DATA_URL = re.compile(r"data:(?P<type>[^;,]*)(?P<params>(;[^;,]*)*?);base64,(?P<data>.*)", re.DOTALL)


def ui_user_content(message: Any) -> str | list[dict[str, Any]]:
    """The content of a user UIMessage's text and file parts (other parts are not read): one text is a string, else
    a list of Deuz parts, a file's data URL decoded. ValueError, saying what is wrong, for anything else."""
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        raise ValueError("The last message must be a UIMessage with a list of parts.")
    content: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise ValueError("A text part's text must be a string.")
            content.append({"type": "text", "text": part["text"]})
        elif kind == "file":
            content.append(_file_part(part))
    if not content or all(part["type"] == "text" and not part["text"].strip() for part in content):
        raise ValueError("The last user message has no text and no file.")
    if len(content) == 1 and content[0]["type"] == "text":
        return content[0]["text"]
    return content


def _file_part(part: dict[str, Any]) -> dict[str, Any]:
    url, media_type = part.get("url"), part.get("mediaType")
    if not isinstance(media_type, str) or not media_type:
        raise ValueError("A file part needs its mediaType.")
    match = _DATA_URL.fullmatch(url) if isinstance(url, str) else None
    if match is None:
        raise ValueError("A file part's url must be a base64 data: URL (Deuz fetches no URL).")
    try:
        data = base64.b64decode(match["data"], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("A file part's data: URL is not valid base64.") from None
    found = {"type": "image" if media_type.startswith("image/") else "file", "data": data, "media_type": media_type}
    if isinstance(part.get("filename"), str) and part["filename"]:
        found["filename"] = part["filename"]
    return found


def ui_approval_responses(message: Any) -> list[dict[str, Any]]:
    """The verdicts an assistant UIMessage carries: ``{"approval_id", "approved", "reason"}`` for each tool part in
    state ``approval-responded``. ValueError when one is malformed."""
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        raise ValueError("The last message must be a UIMessage with a list of parts.")
    verdicts = []
    for part in parts:
        if not isinstance(part, dict) or part.get("state") != "approval-responded":
            continue
        approval = part.get("approval")
        if not (isinstance(approval, dict) and isinstance(approval.get("id"), str)
                and isinstance(approval.get("approved"), bool)):
            raise ValueError("A tool part in state approval-responded needs approval {id: string, approved: boolean}.")
        reason = approval.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise ValueError("An approval's reason must be a string.")
        verdicts.append({"approval_id": approval["id"], "approved": approval["approved"], "reason": reason or ""})
    return verdicts
