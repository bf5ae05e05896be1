"""``GET /metrics``: the Prometheus text exposition, for a bearer token equal to ``DEUZ_METRICS_TOKEN``.

Unset, the endpoint does not exist (404): nothing about the deployment is shown to anyone. Set, a scrape must send
``Authorization: Bearer <token>`` (compared in constant time); anything else answers 401 with a
``WWW-Authenticate`` challenge. The standard process and platform collectors are included, as Prometheus's own
clients expect.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from observability.measures import durable_measures, process_measures
from observability.tallies import tallies_fold

__all__ = ["metrics"]


class _Collector:
    """The Deuz measures, collected anew at each scrape."""

    def collect(self):
        tallies_fold()  # what the journals told since the last scrape
        yield from durable_measures()
        yield from process_measures()


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    registry.register(_Collector())
    return registry


_REGISTRY = _registry()


def _authorized(request: HttpRequest, token: str) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.DEUZ_METRICS_TOKEN
    if not token:
        raise Http404("Metrics are off: DEUZ_METRICS_TOKEN is unset.")
    if not _authorized(request, token):
        response = HttpResponse("A bearer token is needed: Authorization: Bearer <DEUZ_METRICS_TOKEN>.\n",
                                status=401, content_type="text/plain; charset=utf-8")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(_REGISTRY), content_type=CONTENT_TYPE_LATEST)
