"""OpenAIChatModel: OpenAI Chat Completions, streamed, as a runtime model.

Works with any OpenAI-compatible server through ``base_url``. The system prompt and any ``system`` messages
become one leading ``system`` message; each tool result becomes its own ``tool`` message.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from ..model import ModelRequest

from .base import SdkModel, _base64, _output_text, _plain_text

__all__ = ["OpenAIChatModel", "create_openai"]


class OpenAIChatModel(SdkModel):
    """A chat model behind ``client.chat.completions.create(..., stream=True)``.

    Pass ``client`` (an ``openai.AsyncOpenAI``) to configure retries, timeouts or transport yourself;
    otherwise the model builds one from ``api_key`` (default: ``OPENAI_API_KEY``) and ``base_url``.
    """

    def _build_client(self, *, api_key: str | None, base_url: str | None) -> Any:
        import openai

        return openai.AsyncOpenAI(api_key=api_key, base_url=base_url)

    def _sdk_errors(self) -> type[BaseException]:
        import openai

        return openai.OpenAIError

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        return chat_params(request)

    async def _events(self, client: Any, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        usage = {"input_tokens": 0, "output_tokens": 0}
        calls: dict[int, dict[str, Any]] = {}  # tool call index -> id, name, argument pieces
        stream = await client.chat.completions.create(
            model=self.model_id, stream=True, stream_options={"include_usage": True}, **params
        )
        async with stream:
            async for chunk in stream:
                if chunk.usage is not None:  # the last chunk, with empty choices
                    usage = {
                        "input_tokens": chunk.usage.prompt_tokens or 0,
                        "output_tokens": chunk.usage.completion_tokens or 0,
                    }
                for choice in chunk.choices or ():
                    if choice.index != 0:
                        continue
                    delta = choice.delta
                    if delta.content:
                        yield {"type": "text-delta", "text": delta.content}
                    for piece in delta.tool_calls or ():
                        call = calls.setdefault(piece.index, {"id": None, "name": "", "arguments": []})
                        if piece.id:
                            call["id"] = piece.id
                        if piece.function is not None:
                            # The name arrives whole in the call's first delta; the arguments in pieces.
                            if piece.function.name and not call["name"]:
                                call["name"] = piece.function.name
                            if piece.function.arguments:
                                call["arguments"].append(piece.function.arguments)
        for index in sorted(calls):
            yield _tool_call(calls[index])
        yield {"type": "finish", "usage": usage}


def create_openai(api_key: str | None = None, **options: Any) -> Callable[[str], OpenAIChatModel]:
    """A provider: ``create_openai(api_key=..., base_url=...)("gpt-...")`` is an OpenAIChatModel with those options."""

    def factory(model_id: str) -> OpenAIChatModel:
        return OpenAIChatModel(model_id, api_key=api_key, **options)

    return factory


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
    return {"role": "tool", "tool_call_id": part["tool_call_id"], "content": _output_text(part.get("output"))}


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


# ----------------------------------------------------------------- the response


def _tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    raw = "".join(call["arguments"])
    try:
        tool_input = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise ValueError(f"The model streamed invalid JSON arguments for tool {call['name']!r}: {raw[:200]!r}") from exc
    if not isinstance(tool_input, dict):
        raise ValueError(f"The model streamed non-object arguments for tool {call['name']!r}: {raw[:200]!r}")
    return {
        "type": "tool-call",
        "tool_call_id": call["id"] or f"call_{uuid.uuid4().hex[:24]}",
        "tool_name": call["name"],
        "input": tool_input,
    }
