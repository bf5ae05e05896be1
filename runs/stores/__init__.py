"""Back ends for the runtime's store protocols, chosen in settings.DEUZ_STORES."""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

__all__ = ["get_store"]


@functools.cache
def get_store(alias: str) -> Any:
    """The store configured under ``alias`` (``sessions``, ...), built once per process."""
    config = settings.DEUZ_STORES.get(alias)
    if config is None:
        raise ImproperlyConfigured(f"DEUZ_STORES has no {alias!r} entry.")
    try:
        backend = import_string(config["BACKEND"])
    except (ImportError, KeyError) as exc:
        raise ImproperlyConfigured(f"DEUZ_STORES[{alias!r}] names no importable BACKEND: {exc}") from exc
    return backend(**config.get("OPTIONS", {}))


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: object) -> None:
    if setting == "DEUZ_STORES":
        get_store.cache_clear()
