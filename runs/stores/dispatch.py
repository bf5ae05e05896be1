"""The stores' one calling convention: a store method answers at once for a sync caller and an awaitable for an
async one (the runtime awaits whatever is awaitable), so one store serves a test, a worker and a consumer."""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import sync_to_async

__all__ = ["dispatch"]


def dispatch(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Call the sync ORM ``function`` directly, or hand back an awaitable of it when an event loop runs in this
    thread (the ORM may not run on a loop's thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function(*args, **kwargs)
    return sync_to_async(function)(*args, **kwargs)
