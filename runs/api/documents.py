"""The OpenAPI document's views as /api/ serves them: the document in JSON unless YAML is asked for, the Swagger UI
page, and every error of either in JSON, as on every other /api/ path (issue 22)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.renderers import (
    OpenApiJsonRenderer,
    OpenApiJsonRenderer2,
    OpenApiYamlRenderer,
    OpenApiYamlRenderer2,
)
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

__all__ = ["ApiDocsView", "ApiSchemaView"]


class _ErrorsInJson:
    """Error answers rendered as JSON whatever renderer the view negotiated (the docs page's is HTML)."""

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        if response.status_code >= 400:
            request.accepted_renderer, request.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


class ApiSchemaView(_ErrorsInJson, SpectacularAPIView):
    """``/api/schema/``: JSON first (drf-spectacular serves YAML first); YAML for ``Accept:
    application/vnd.oai.openapi`` or ``?format=yaml``."""

    renderer_classes = [OpenApiJsonRenderer, OpenApiJsonRenderer2, OpenApiYamlRenderer, OpenApiYamlRenderer2]


class ApiDocsView(_ErrorsInJson, SpectacularSwaggerView):
    """``/api/docs/``: the Swagger UI page, the one HTML answer under /api/ (a person reads it); OPTIONS is a 405
    like any other method it does not serve (DRF's description of it failed on the page's template renderer)."""

    metadata_class = None
