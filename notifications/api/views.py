"""The webhooks API: each view parses its input, reads through a selector or writes through one service, and
renders.

  POST   /api/webhooks/                     {"url", "events", "description"?}: 201 with the secret, shown once
  GET    /api/webhooks/                     your subscriptions, newest first, paginated (no secrets)
  DELETE /api/webhooks/{id}/                204; its undelivered events are dropped
  GET    /api/webhooks/{id}/deliveries/     its deliveries, newest first, each with its attempts

Any signed-in user manages their own subscriptions, and receives the events of the runs they may read
(runs.access); another user's subscription is a 404, exactly as a missing one.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from notifications.api.serializers import (
    WebhookDeliverySerializer,
    WebhookSubscriptionCreatedSerializer,
    WebhookSubscriptionCreateInputSerializer,
    WebhookSubscriptionSerializer,
)
from notifications.selectors import webhook_delivery_list, webhook_subscription_get, webhook_subscription_list
from notifications.services import webhook_subscription_create, webhook_subscription_delete
from runs.api.generic import PaginatedApiView, validated_input
from runs.api.schema import BAD_PAGE, CSRF_REFUSED, UNAUTHENTICATED, WWW_AUTHENTICATE, error_answer, json_body_answers

__all__ = ["WebhookCollectionApi", "WebhookDeliveryListApi", "WebhookDetailApi"]

_NOT_FOUND = error_answer("No such subscription, or one of another user.")
SUBSCRIPTION_ID_PATH = OpenApiParameter(
    "id", {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}, OpenApiParameter.PATH,
    description="The subscription's id, from its creation or the list.",
)


class WebhookCollectionApi(PaginatedApiView):
    """``/api/webhooks/``: GET lists your subscriptions, POST makes one."""

    @extend_schema(
        operation_id="webhooks_list",
        summary="Your webhook subscriptions",
        description="Your subscriptions, newest first, paginated. Secrets are never listed: each is shown once, "
        "when its subscription is made.",
        parameters=[WWW_AUTHENTICATE],
        responses={200: WebhookSubscriptionSerializer(many=True), 401: UNAUTHENTICATED, 404: BAD_PAGE},
    )
    def get(self, request: Request) -> Response:
        return self.paginated(request, webhook_subscription_list(owner=request.user), WebhookSubscriptionSerializer)

    @extend_schema(
        operation_id="webhooks_create",
        summary="Subscribe a URL to events",
        description="Events of the runs you may read are POSTed to the URL as Standard Webhooks: a JSON body "
        '{"type", "timestamp", "data"} with the headers webhook-id, webhook-timestamp and webhook-signature, which '
        "the standardwebhooks package verifies with the secret in this answer (shown only here). `data` is the "
        "run's JSON for run.* events (as GET /api/runs/{run_id}/ answers it, never with approval tokens), "
        '{"run_id", "approval"} for approval.*, {"run_id", "effect"} for effect.*. Each delivery is made at least '
        "once, retried after a non-2xx answer or 10 s without one, first after DEUZ_WEBHOOK_RETRY_BASE_SECONDS "
        "(30 by default), each next retry twice as long after the last, for at least 24 hours; redirects are not "
        "followed. Bodies over 1 MiB answer 413.",
        request=WebhookSubscriptionCreateInputSerializer,
        parameters=[WWW_AUTHENTICATE],
        responses=json_body_answers({
            201: WebhookSubscriptionCreatedSerializer,
            400: error_answer("Field errors: a URL that is not http(s) or has no host, an unknown event type, no "
                              "event type; malformed JSON."),
        }),
    )
    def post(self, request: Request) -> Response:
        fields = validated_input(WebhookSubscriptionCreateInputSerializer, request.data)
        subscription = webhook_subscription_create(owner=request.user, **fields)
        return Response(WebhookSubscriptionCreatedSerializer(subscription).data, status=status.HTTP_201_CREATED)


class WebhookDetailApi(PaginatedApiView):
    @extend_schema(
        operation_id="webhooks_destroy",
        summary="Delete a webhook subscription",
        description="Nothing more is sent to it: its undelivered events are dropped with its delivery log.",
        parameters=[SUBSCRIPTION_ID_PATH, WWW_AUTHENTICATE],
        responses={
            204: OpenApiResponse(description="Deleted."),
            401: UNAUTHENTICATED,
            403: error_answer(f"Refused for {CSRF_REFUSED}."),
            404: _NOT_FOUND,
        },
    )
    def delete(self, request: Request, id: str) -> Response:
        webhook_subscription_delete(owner=request.user, subscription_id=id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookDeliveryListApi(PaginatedApiView):
    @extend_schema(
        operation_id="webhooks_deliveries_list",
        summary="A subscription's deliveries and their attempts",
        description="Each event sent (or to be sent) to the subscription, newest first, paginated: its webhook-id, "
        "status (pending, delivered, failed once the retries ran out, skipped when you may no longer read the "
        "run), when the next attempt is due, and every attempt with its HTTP status or error, duration and the "
        "retry it scheduled.",
        parameters=[SUBSCRIPTION_ID_PATH, WWW_AUTHENTICATE],
        responses={200: WebhookDeliverySerializer(many=True), 401: UNAUTHENTICATED,
                   404: error_answer('No such subscription, or one of another user; or a page that does not exist '
                                     '("Invalid page.").')},
    )
    def get(self, request: Request, id: str) -> Response:
        subscription = webhook_subscription_get(owner=request.user, subscription_id=id)
        return self.paginated(request, webhook_delivery_list(subscription=subscription), WebhookDeliverySerializer)
