"""The API's only parser: JSON bounded in size and shape, so no request body can make a view fail with a 500;
and the request class that hands it bodies sent without a Content-Length (Transfer-Encoding: chunked).
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

from django.http import HttpRequest
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.request import Request

__all__ = ["BoundedJSONParser", "ChunkedBodyRequest", "MAX_JSON_DEPTH"]

#: The deepest nesting of arrays and objects a body may have. Messages need about six levels; tool inputs a
#: few more. Deeper bodies are refused here because code that walks them recursively would overflow the stack.
MAX_JSON_DEPTH = 32


class BoundedJSONParser(JSONParser):
    """JSON bodies within DATA_UPLOAD_MAX_MEMORY_SIZE, finite numbers, valid Unicode and MAX_JSON_DEPTH levels.

    DRF's JSONParser reads the raw stream, bypassing Django's body size limit; reading ``request.body`` applies
    it (raising RequestDataTooBig, which the exception handler answers with 413). Lone surrogates and
    out-of-range numbers parse as Python values that cannot be stored or rendered again, so they are refused here.
    """

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        raw = stream.body if isinstance(stream, HttpRequest) else stream.read()
        encoding = get_encoding(parser_context or {})
        try:
            data = json.loads(raw.decode(encoding), parse_constant=_refuse_constant, parse_float=_finite_float)
        except RecursionError:
            raise ParseError(f"JSON parse error - the body is nested deeper than {MAX_JSON_DEPTH} levels.") from None
        except (ValueError, LookupError) as error:  # LookupError: an unknown charset in Content-Type
            raise ParseError(f"JSON parse error - {error}") from None
        _check_value(data, depth=0)
        return data


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _check_value(value: Any, *, depth: int) -> None:
    if isinstance(value, str):
        _check_text(value)
    elif isinstance(value, (list, dict)):
        if depth >= MAX_JSON_DEPTH:
            raise ParseError(f"JSON parse error - the body is nested deeper than {MAX_JSON_DEPTH} levels.")
        if isinstance(value, dict):
            for key, item in value.items():
                _check_text(key)
                _check_value(item, depth=depth + 1)
        else:
            for item in value:
                _check_value(item, depth=depth + 1)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ParseError("JSON parse error - a string holds a lone surrogate escape (not valid Unicode).") from None


class ChunkedBodyRequest(Request):
    """A DRF Request that also parses a body sent with ``Transfer-Encoding: chunked`` and no Content-Length.

    DRF takes a missing Content-Length for "no body" and never calls a parser, so a chunked POST was answered as
    if it were empty (400), and a large one was not refused (400 instead of 413). Under daphne, Django's ASGI
    handler has buffered the whole body by then, and ``HttpRequest.body`` checks the buffered size against
    DATA_UPLOAD_MAX_MEMORY_SIZE, so handing the request to the parser gives the body's own answer, or 413.
    (Under WSGI, Django reads no more than Content-Length: a WSGI server must set it.)
    """

    def _load_stream(self) -> None:
        super()._load_stream()
        if self._stream is None and _is_chunked(self._request):
            self._stream = self._request if not self._request._read_started else io.BytesIO(self._request.body)


def _is_chunked(request: HttpRequest) -> bool:
    encoding = request.META.get("HTTP_TRANSFER_ENCODING", "")
    return not request.META.get("CONTENT_LENGTH") and "chunked" in encoding.lower()
