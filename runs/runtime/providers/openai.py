"""OpenAIChatModel: OpenAI Chat Completions, streamed, as a runtime model.

Works with any OpenAI-compatible server through ``base_url`` (which ends in ``/v1``: vLLM, llama.cpp,
Ollama, LM Studio). The system prompt and any ``system`` messages become one leading ``system`` message;
each tool result becomes its own ``tool`` message, an error one prefixed ``Error: `` so the model can tell.

The stream is read defensively, since compatible servers differ from OpenAI's own: a tool call delta with a
new id starts a new call even on an index already used (Ollama numbers parallel calls 0, 0, ...), one with
no index continues the latest call, a stream with no usage chunk reports zero usage, and
``include_usage=False`` drops ``stream_options`` for servers that reject it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from ..model import ModelRequest
from .base import SdkModel, _base64, _plain_text, parse_tool_input, tool_result_text

__all__ = ["TOOL_ERROR_PREFIX", "OpenAIChatModel", "chat_params", "create_openai"]

#: What an ``is_error`` tool result's content starts with: Chat Completions has no error flag of its own.
TOOL_ERROR_PREFIX = "Error: "

# OpenAI's finish_reason -> the runtime's step finish reason.
_FINISH_REASONS = {
    "stop": "stop",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "length": "length",
    "content_filter": "content-filter",
}


class OpenAIChatModel(SdkModel):
    """A chat model behind ``client.chat.completions.create(..., stream=True)``.

    Takes the options of ``SdkModel`` (``api_key`` defaults to ``OPENAI_API_KEY``, ``base_url`` to
    ``OPENAI_BASE_URL``; ``max_tokens`` is sent only when set, as ``max_completion_tokens`` to OpenAI and
    ``max_tokens`` to other servers), plus ``include_usage`` (default on: ask for the usage chunk).
    """

    api_key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"

    def __init__(self, model_id: str, *, include_usage: bool = True, **options: Any) -> None:
        super().__init__(model_id, **options)
        self.include_usage = bool(include_usage)

    def _build_client(self, **kwargs: Any) -> Any:
        import openai

        if self.is_keyless and not kwargs.get("api_key"):
            # The SDK refuses to build a client without a key; no request carries this one (see _omit).
            kwargs["api_key"] = "no-key-for-a-local-server"
        return openai.AsyncOpenAI(**kwargs)

    def _omit(self) -> Any:
        import openai

        return openai.Omit()

    def _sdk_errors(self) -> type[BaseException]:
        import openai

        return openai.OpenAIError

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params = chat_params(request)
        if self.include_usage:
            params["stream_options"] = {"include_usage": True}
        if self.max_tokens is not None:
            params[self._max_tokens_param()] = self.max_tokens
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.tool_choice is not None and params.get("tools"):
            params["tool_choice"] = _tool_choice(self.tool_choice)
        return params

    def _max_tokens_param(self) -> str:
        # OpenAI deprecated max_tokens (its reasoning models reject it); compatible servers know max_tokens.
        host = urlsplit(self.base_url or "https://api.openai.com/v1").hostname or ""
        return "max_completion_tokens" if host == "api.openai.com" else "max_tokens"

    async def _events(self, client: Any, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        usage: dict[str, int] = {"input_tokens": 0, "output_tokens": 0}
        calls = _ToolCalls()
        finish_reason: str | None = None
        refused = False
        import openai

        stream = await client.chat.completions.create(model=self.model_id, stream=True, **params, **self._request_options())
        try:
            async with stream:
                async for chunk in stream:
                    if getattr(chunk, "usage", None) is not None:  # the last chunk (or, on some servers, every one)
                        usage = _usage(chunk.usage)
                        yield {"type": "usage", "usage": usage}
                    for choice in chunk.choices or ():
                        if choice.index not in (0, None):
                            continue
                        finish_reason = choice.finish_reason or finish_reason
                        delta = choice.delta
                        if delta is None:
                            continue
                        if delta.content:
                            yield {"type": "text-delta", "text": delta.content}
                        refusal = getattr(delta, "refusal", None)
                        if refusal:
                            refused = True
                            yield {"type": "text-delta", "text": refusal}
                        for piece in delta.tool_calls or ():
                            calls.add(piece)
        except openai.APIConnectionError as exc:
            if not isinstance(exc, openai.APITimeoutError):
                exc.is_stream_cut = True  # the SDK's error for a broken body; classify_model_error reads this
            raise
        step_reason = "content-filter" if refused else _FINISH_REASONS.get(finish_reason or "", "other" if finish_reason else None)
        cut_off = finish_reason == "length"
        for call in calls.calls:
            yield self._tool_call(call, cut_off=cut_off and call is calls.calls[-1])
        yield {"type": "finish", "usage": usage, "finish_reason": step_reason}

    def _tool_call(self, call: Mapping[str, Any], *, cut_off: bool) -> dict[str, Any]:
        tool_input, error = parse_tool_input("".join(call["arguments"]), cut_off=cut_off, max_tokens=self.max_tokens)
        event = {
            "type": "tool-call",
            "tool_call_id": call["id"] or f"call_{uuid.uuid4().hex[:24]}",
            "tool_name": call["name"],
            "input": tool_input,
        }
        if error is not None:
            event["input_error"] = error
        return event


def create_openai(api_key: str | None = None, **options: Any) -> Callable[[str], OpenAIChatModel]:
    """A provider: ``create_openai(api_key=..., base_url=...)("gpt-...")`` is an OpenAIChatModel with those options."""

    def factory(model_id: str) -> OpenAIChatModel:
        return OpenAIChatModel(model_id, api_key=api_key, **options)

    return factory


class _ToolCalls:
    """Tool call deltas assembled into calls, in the order they started."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._by_index: dict[Any, dict[str, Any]] = {}

    def add(self, piece: Any) -> None:
        index = getattr(piece, "index", None)
        function = getattr(piece, "function", None)
        name = getattr(function, "name", None) or ""
        arguments = getattr(function, "arguments", None) or ""
        current = self._by_index.get(index) if index is not None else (self.calls[-1] if self.calls else None)
        if current is None or self._starts_new_call(current, piece.id, name, index):
            current = {"id": None, "name": "", "arguments": []}
            self.calls.append(current)
            self._by_index[index] = current
        if piece.id:
            current["id"] = piece.id
        # The name arrives whole in the call's first delta; the arguments in pieces.
        if name and not current["name"]:
            current["name"] = name
        if arguments:
            current["arguments"].append(arguments)

    @staticmethod
    def _starts_new_call(current: Mapping[str, Any], call_id: str | None, name: str, index: Any) -> bool:
        if call_id and current["id"] and call_id != current["id"]:
            return True  # a new id on a reused index (or on a delta with none)
        if index is None and not call_id and name and current["name"] and _is_complete_json(current["arguments"]):
            return True  # neither index nor id: a named delta after a finished call is the next call
        return False


def _is_complete_json(pieces: list[str]) -> bool:
    try:
        json.loads("".join(pieces))
    except ValueError:
        return False
    return True


def _usage(raw: Any) -> dict[str, int]:
    usage = {"input_tokens": getattr(raw, "prompt_tokens", None) or 0, "output_tokens": getattr(raw, "completion_tokens", None) or 0}
    cached = getattr(getattr(raw, "prompt_tokens_details", None), "cached_tokens", None)
    if cached:
        usage["cache_read_tokens"] = int(cached)  # a part of prompt_tokens, priced at the cached rate
    return usage


def _tool_choice(choice: str | Mapping[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        return choice
    if "tool_name" in choice:
        return {"type": "function", "function": {"name": choice["tool_name"]}}
    return dict(choice)


# ------------------------------------------------------------------ the request


def chat_params(request: ModelRequest) -> dict[str, Any]:
    """The ``messages`` and ``tools`` arguments of ``chat.completions.create`` for a runtime request."""
    system = [request["system"]] if request.get("system") else []
    messages: list[dict[str, Any]] = []
    for message in request.get("messages") or []:
        role, content = message["role"], message["content"]
        if role == "system":
            text = _plain_text(content)
            if text:
                system.append(text)
        elif role == "assistant":
            entry = _assistant(content)
            if entry is not None:
                messages.append(entry)
        else:
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
            messages.extend(_tool_message(part) for part in parts if part["type"] == "tool_result")
            user = _user_content([part for part in parts if part["type"] != "tool_result"])
            if user:
                messages.append({"role": "user", "content": user})
    if system:
        messages.insert(0, {"role": "system", "content": "\n\n".join(system)})
    params: dict[str, Any] = {"messages": messages}
    tools = [_tool(spec) for spec in request.get("tools") or []]
    if tools:
        params["tools"] = tools
    return params


def _tool(spec: Mapping[str, Any]) -> dict[str, Any]:
    function = {"name": spec["name"], "parameters": spec.get("input_schema") or {"type": "object", "properties": {}}}
    if spec.get("description"):
        function["description"] = spec["description"]
    return {"type": "function", "function": function}


def _assistant(content: str | Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    text = _plain_text(parts)
    calls = [
        {
            "id": part["tool_call_id"],
            "type": "function",
            "function": {"name": part["tool_name"], "arguments": json.dumps(part["input"], ensure_ascii=False)},
        }
        for part in parts
        if part["type"] == "tool_call"
    ]
    if not text and not calls:
        return None
    entry: dict[str, Any] = {"role": "assistant"}
    if text:
        entry["content"] = text
    if calls:
        entry["tool_calls"] = calls
    return entry


def _tool_message(part: Mapping[str, Any]) -> dict[str, Any]:
    content = tool_result_text(part)
    if part.get("is_error") and not content.startswith(TOOL_ERROR_PREFIX):
        content = TOOL_ERROR_PREFIX + content
    return {"role": "tool", "tool_call_id": part["tool_call_id"], "content": content}


def _user_content(parts: list[Mapping[str, Any]]) -> str | list[dict[str, Any]]:
    """A string when the message is all text (what every compatible server takes), else content parts."""
    if all(part["type"] == "text" for part in parts):
        return _plain_text(parts)
    content: list[dict[str, Any]] = []
    for part in parts:
        kind = part["type"]
        if kind == "text":
            if part["text"]:
                content.append({"type": "text", "text": part["text"]})
        elif kind in ("image", "file"):
            media_type = part["media_type"]
            url = f"data:{media_type};base64,{_base64(part['data'])}"
            if media_type.startswith("image/"):
                content.append({"type": "image_url", "image_url": {"url": url}})
            else:
                content.append({"type": "file", "file": {"filename": part.get("filename") or "file", "file_data": url}})
        else:
            raise ValueError(f"OpenAIChatModel cannot send a {kind!r} part in a user message.")
    return content
