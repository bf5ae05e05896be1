"""The API's view classes, shared by every app's API: DRF's APIView reading bodies sent chunked too
(runs.api.parsers), and its paginated form with the page numbers the document describes.

A plain APIView rather than a GenericAPIView: the browsable API and OPTIONS would ask a GenericAPIView for its one
serializer_class, and these views have none (their input and output serializers differ).
"""

from __future__ import annotations

from typing import Any

from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from runs.api.parsers import ChunkedBodyRequest

__all__ = ["ApiPagination", "ApiView", "PaginatedApiView"]


class ApiPagination(PageNumberPagination):
    """DRF's page numbers, exactly as the document says: a whole number from 1 (DRF also reads "last")."""

    last_page_strings = ()

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"]["minimum"] = 1
        return parameters


class ApiView(APIView):
    """DRF's APIView with the API's request class: bodies sent chunked are read, and bounded, too."""

    def initialize_request(self, request, *args, **kwargs) -> Request:
        return ChunkedBodyRequest(
            request,
            parsers=self.get_parsers(),
            authenticators=self.get_authenticators(),
            negotiator=self.get_content_negotiator(),
            parser_context=self.get_parser_context(request),
        )


class PaginatedApiView(ApiView):
    """Pages a list as {"count", "next", "previous", "results"}."""

    # drf-spectacular reads this attribute to document the page shape.
    pagination_class = ApiPagination

    def serializer_context(self, request: Request) -> dict[str, Any]:
        """What the serializer of a page is given as its context (nothing, unless a view says otherwise)."""
        return {}

    def paginated(self, request: Request, rows, serializer_class) -> Response:
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        rendered = serializer_class(page, many=True, context=self.serializer_context(request))
        return paginator.get_paginated_response(rendered.data)


def validated_input(serializer_class: type, data: Any) -> dict[str, Any]:
    """The fields of a request's input, checked by ``serializer_class`` (its errors answer 400)."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
