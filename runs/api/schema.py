"""The OpenAPI document's parts that DRF's introspection cannot find: shared answers and parameters, the input
shapes drf-spectacular cannot read from custom fields, and the Server-Sent Events endpoint.

The events endpoint (``runs.api.events.run_events``) is a plain async Django view, not a DRF one, and
drf-spectacular only documents DRF views. ``RunEventsSchemaApi`` describes it, and the preprocessing hook
``run_events_documented`` puts that description on the route where the real view is mapped, so the document
follows the URLconf. The class never serves a request.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.views import APIView

from runs.api.inputs import MAX_ID_CHARS
from runs.api.messages import PART_SERIALIZERS
from runs.api.outputs import ErrorSerializer
from runs.api.stream_parts import EVENT_STREAM_SCHEMA, EXAMPLE_STREAM, stream_part_components

__all__ = [
    "APPROVAL_ID_PATH",
    "BAD_PAGE",
    "CSRF_REFUSED",
    "RUN_ID_PATH",
    "STEP_INDEX_PATH",
    "RunEventsSchemaApi",
    "THREAD_ID_PATH",
    "UNAUTHENTICATED",
    "WWW_AUTHENTICATE",
    "empty_query_values_documented",
    "error_answer",
    "json_body_answers",
    "run_events_documented",
    "stream_parts_documented",
]

_ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS}

RUN_ID_PATH = OpenApiParameter(
    "run_id",
    {**_ID_SCHEMA, "pattern": "^[A-Za-z0-9._:-]+$"},
    OpenApiParameter.PATH,
    description="The run's id; one no run can have is answered 404 like an unknown one.",
)
STEP_INDEX_PATH = OpenApiParameter(
    "step_index",
    {"type": "string", "pattern": "^[0-9]{1,9}$"},
    OpenApiParameter.PATH,
    description="The step of the checkpoint (its `step_index` in the checkpoint list); the run's latest checkpoint "
    "of that step is the one forked.",
)
APPROVAL_ID_PATH = OpenApiParameter(
    "approval_id",
    {**_ID_SCHEMA, "pattern": "^[A-Za-z0-9._:-]+$"},
    OpenApiParameter.PATH,
    description="The pending approval request's approval_id, from the run's pending_approvals.",
)
THREAD_ID_PATH = OpenApiParameter(
    "thread_id",
    {**_ID_SCHEMA, "pattern": "^[A-Za-z0-9._:-]+$"},
    OpenApiParameter.PATH,
    description="The thread's id; one no thread can have is answered 404 like an unknown one.",
)
WWW_AUTHENTICATE = OpenApiParameter(
    "WWW-Authenticate",
    str,
    OpenApiParameter.HEADER,
    response=[401],
    enum=["Token"],
    description="How to authenticate: `Authorization: Token KEY`.",
)


def error_answer(description: str) -> OpenApiResponse:
    """An error answer of the document: the API's one error shape (``ErrorSerializer``), and when it is given."""
    return OpenApiResponse(ErrorSerializer, description=description)


UNAUTHENTICATED = error_answer("No credentials, or a token that is not valid (the answer asks for a Token).")
CSRF_REFUSED = "a signed-in browser session that did not send its CSRF token"
BAD_PAGE = error_answer('A page that does not exist ("Invalid page.").')


def json_body_answers(answers: dict[Any, Any], *, forbidden: str = f"Refused for {CSRF_REFUSED}.") -> dict[Any, Any]:
    """The answers of a view that reads a JSON body: ``answers`` and the refusals every such view has (401; 403
    saying ``forbidden``; 413; 415), by code."""
    every = {
        401: UNAUTHENTICATED,
        403: error_answer(forbidden),
        413: error_answer("The body is larger than 1 MiB (chunked bodies too)."),
        415: error_answer("The body is not application/json."),
        **answers,
    }
    return dict(sorted(every.items()))


#: The events endpoint's answer; ``stream_parts_documented`` puts its schema (runs.api.stream_parts.EVENT_STREAM_SCHEMA:
#: an event, or the whole body as text) and the components it names in the document.
_EVENT_STREAM = OpenApiResponse(
    OpenApiTypes.STR,
    description="The event stream: `retry: 1000` once, then for each part `id: <seq>` and `data: <StreamPart as "
    "JSON>` (see the StreamPart schema, a union discriminated by `type`) and a blank line; `data: [DONE]` without an "
    "id ends the turn.",
    examples=[OpenApiExample("A coder run resumed after a verdict", value=EXAMPLE_STREAM,
                             media_type="text/event-stream", response_only=True)],
)

class RunEventsSchemaApi(APIView):
    """The description of ``GET /api/runs/{run_id}/events/`` (served by runs.api.events.run_events)."""

    @extend_schema(
        operation_id="runs_events",
        summary="Follow the run as Server-Sent Events",
        description=(
            "The run's stream parts as Server-Sent Events: each part is `id: <seq>` and `data: <JSON part>`; seqs "
            "start at 0 and are gapless across every leg. It replays from the cursor, then tails the live run, and "
            "continues a run whose producer is gone. `data: [DONE]` (without an id) ends a turn when the run is "
            "neither queued nor running; a store failure sends an error part and no `[DONE]`, so the client "
            "reconnects with its cursor. A run that does not exist, or that the user may not read, is a 404 before "
            "any event; past the per-user cap of open streams (DEUZ_MAX_STREAMS_PER_USER) a 429. Comments "
            "(`: keep-alive`) are sent while the run is idle. The stream opens with `retry: 1000`, so a plain EventSource "
            "reconnects after a second, with its Last-Event-ID. Each `data:` is a StreamPart (its `type` tells which): "
            "start, step-start, text-delta, tool-call, tool-approval-request, tool-approval-verdict (before the "
            "settled call's tool-result), tool-result, step-finish, finish, error, recovery, retry, cancelled; a "
            "sub-agent's parts carry `agent_path`, the top-level agent's none."
        ),
        parameters=[
            RUN_ID_PATH,
            OpenApiParameter(
                "Last-Event-ID",
                {"type": "string", "pattern": "^(-1|[0-9]{1,18})?$"},
                OpenApiParameter.HEADER,
                description="The last seq seen; the answer starts at the seq after it. Wins over `cursor`; empty is "
                "the same as leaving it out.",
            ),
            OpenApiParameter(
                "cursor",
                {"type": "integer", "minimum": -1, "maximum": 999_999_999_999_999_999},  # parse_cursor's 18 digits
                OpenApiParameter.QUERY,
                description="As Last-Event-ID, for clients that cannot set headers. -1 (the default) replays all.",
            ),
            WWW_AUTHENTICATE,
        ],
        responses={
            (200, "text/event-stream"): _EVENT_STREAM,
            400: error_answer("The cursor is not a whole number of at least -1."),
            401: UNAUTHENTICATED,
            404: error_answer("No such run, or one the user may not read."),
            429: error_answer("The user has as many streams open as they may."),
            503: error_answer("The database cannot be reached; retry later."),
        },
    )
    def get(self, request: Any, run_id: str) -> Any:
        # Only the schema generator reads this class; a URLconf that maps it is misconfigured.
        raise ImproperlyConfigured("RunEventsSchemaApi only documents the events route; map runs.api.events.run_events.")


def run_events_documented(endpoints: list[tuple]) -> list[tuple]:
    """PREPROCESSING_HOOKS entry: the events route, wherever the URLconf maps run_events, as RunEventsSchemaApi."""
    from runs.api.events import run_events

    documented = [
        (path, path_regex, "GET", RunEventsSchemaApi.as_view())
        for path, path_regex, callback in _routes(get_resolver().url_patterns, prefix="")
        if inspect.unwrap(callback) is inspect.unwrap(run_events)
    ]
    return [*endpoints, *documented]


def stream_parts_documented(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """POSTPROCESSING_HOOKS entry: the stream part schemas (runs.api.stream_parts) in the components, and the events
    endpoint's stream linked to their union."""
    result.setdefault("components", {}).setdefault("schemas", {}).update(stream_part_components())
    for path_item in result.get("paths", {}).values():
        operation = path_item.get("get")
        if isinstance(operation, dict) and operation.get("operationId") == "runs_events":
            operation["responses"]["200"]["content"]["text/event-stream"]["schema"] = dict(EVENT_STREAM_SCHEMA)
    return result


def empty_query_values_documented(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """POSTPROCESSING_HOOKS entry: every optional query parameter says that an empty value means "absent".

    That is how the API reads them: DRF takes an empty optional form value for a missing one (``?status=`` lists
    every status, ``?page=`` is the first page), and so does the events endpoint (``?cursor=``).
    """
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else ():
                if parameter.get("in") == "query" and not parameter.get("required"):
                    parameter["allowEmptyValue"] = True
                    described = parameter.get("description", "")
                    parameter["description"] = f"{described}\n\nAn empty value is the same as leaving it out.".strip()
    return result


def _routes(patterns: list, *, prefix: str):
    for pattern in patterns:
        path_regex = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, prefix=path_regex)
        elif isinstance(pattern, URLPattern):
            yield "/" + _route_to_path(path_regex), path_regex, pattern.callback


def _route_to_path(route: str) -> str:
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route.lstrip("^"))


# --------------------------------------------------------------------------- input shapes


class ClosedSerializerExtension(OpenApiSerializerExtension):
    """Messages and parts refuse unknown keys, so their schemas say ``additionalProperties: false``."""

    target_class = "runs.api.messages.ClosedSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {**auto_schema._map_basic_serializer(self.target, direction), "additionalProperties": False}


class PartInputSerializerExtension(OpenApiSerializerExtension):
    """A part is one of PART_SERIALIZERS, told apart by its ``type``."""

    target_class = "runs.api.messages.PartInputSerializer"

    def get_name(self, auto_schema: Any, direction: str) -> str:
        return "InputPart"

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        refs = {kind: auto_schema.resolve_serializer(cls, direction).ref for kind, cls in PART_SERIALIZERS.items()}
        return {
            "oneOf": list(refs.values()),
            "discriminator": {"propertyName": "type", "mapping": {k: ref["$ref"] for k, ref in refs.items()}},
        }


class MessageContentFieldExtension(OpenApiSerializerFieldExtension):
    """A message's content: its string form or its list of parts, as the field checks them."""

    target_class = "runs.api.messages.MessageContentField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        text = auto_schema._map_serializer_field(self.target.text, direction)
        auto_schema._insert_field_validators(self.target.text, text)  # maxLength
        return {"oneOf": [text, auto_schema._map_serializer_field(self.target.parts, direction)]}


class ListSerializerLimitsExtension(OpenApiSerializerFieldExtension):
    """A nested list's limits (allow_empty, min_length, max_length) as minItems and maxItems."""

    target_class = "rest_framework.serializers.ListSerializer"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        if schema is None or schema.get("type") != "array":
            return schema
        min_items = self.target.min_length if self.target.min_length is not None else int(not self.target.allow_empty)
        if min_items:
            schema["minItems"] = min_items
        if self.target.max_length is not None:
            schema["maxItems"] = self.target.max_length
        return schema


class StrictCharFieldExtension(OpenApiSerializerFieldExtension):
    """A StrictCharField refuses NUL characters, as every DRF CharField does; the schema says so.

    As ``not: {type: string, pattern: "\\u0000"}`` rather than ``pattern: "^[^\\u0000]*$"``: the same strings
    (typed, so that null stays valid where it is allowed), but a generator (schemathesis, hypothesis) makes
    100,000-character strings for the first cheaply and for the second at great cost.
    """

    target_class = "runs.api.messages.StrictCharField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        return {**schema, "not": {"type": "string", "pattern": "\\u0000"}}
