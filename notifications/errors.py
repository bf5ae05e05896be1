"""Errors of the notifications service.

NotificationError
  WebhookSubscriptionNotFound   (404: no such subscription, or another user's; also a django.http.Http404, so
                                 the API's handler answers it as DRF answers any Http404)
AddressRefused                  (a delivery's host or address is not allowed: no connection is made)
"""

from __future__ import annotations

from django.http import Http404

__all__ = ["AddressRefused", "NotificationError", "WebhookSubscriptionNotFound"]


class NotificationError(Exception):
    """Base for errors a caller of the notifications services can act on."""


class WebhookSubscriptionNotFound(NotificationError, Http404):
    def __init__(self) -> None:
        super().__init__("No such webhook subscription, or one of another user.")


class AddressRefused(NotificationError):
    """A delivery may not connect where its URL leads (notifications.addresses); its message says why."""
