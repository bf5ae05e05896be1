"""The one approval signer of the service, keyed by settings.DEUZ_APPROVAL_SECRET."""

from __future__ import annotations

import functools

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from runs.runtime.durable import ApprovalSigner, create_approval_signer

__all__ = ["approval_signer"]


@functools.cache
def approval_signer() -> ApprovalSigner:
    """Signs the requests a leg sends out and verifies the tokens verdicts echo."""
    return create_approval_signer(secret=settings.DEUZ_APPROVAL_SECRET)


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: object) -> None:
    if setting == "DEUZ_APPROVAL_SECRET":
        approval_signer.cache_clear()
