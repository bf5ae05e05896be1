"""Continuing a dead run from a web process: a follower that finds the run's producer gone (its liveness token free
or its lease lapsed, no terminal sentinel) claims the run exactly as a worker would and runs its leg on its own event loop. The lease is
the one lock: of any number of followers (and workers), one claim wins, and the others follow its journal. The
process holds its follower id's liveness token (runs.ownership.liveness) from before the claim to the leg's end,
so the run is not taken for a dead owner's while it runs here.

The doors that open a follow (runs.api.events, runs.api.stream_socket) hand ``run_continue`` to the follower core
(runs.wire.followers), which never runs a leg itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from runs.execution.legs import leg_execute
from runs.execution.worker import worker_id_default
from runs.ownership.liveness import LivenessToken, liveness_hold
from runs.services.lifecycle import Claim, run_claim

__all__ = ["run_continue"]

logger = logging.getLogger("deuz.followers")

# Continuation legs started by followers, kept referenced so they outlive the request that started them.
_continuations: set[asyncio.Task[None]] = set()


# Runs a follower of this process is claiming now: their other followers leave it to that one.
_claiming: set[str] = set()


def _claim(follower_id: str, run_id: str) -> list[Claim]:
    # As a worker claims: a lapsed lease, or an owner whose liveness token is free (its process died).
    return run_claim(worker_id=follower_id, limit=1, run_id=run_id, take_over_dead=True)


async def run_continue(run_id: str, *, kind: str, call: Callable[..., Any]) -> None:
    """Claim ``run_id`` for this process's ``kind`` of follower (``call`` runs the claim as the follower runs its
    reads) and start its leg here; nothing when another follower or a worker holds it now."""
    if run_id in _claiming:
        return
    follower_id = f"{worker_id_default()}:{kind}"
    _claiming.add(run_id)
    try:
        token = await call(liveness_hold, follower_id)
        try:
            claims = await call(_claim, follower_id, run_id)
        except BaseException:
            await call(token.release)
            raise
    finally:
        _claiming.discard(run_id)
    if not claims:
        await call(token.release)
        return
    logger.info("Follower %s continues run %s (epoch %d).", follower_id, run_id, claims[0].epoch)
    task = asyncio.get_running_loop().create_task(_continue(claims[0], token, call))
    _continuations.add(task)
    task.add_done_callback(_continuations.discard)


async def _continue(claim: Claim, token: LivenessToken, call: Callable[..., Any]) -> None:
    try:
        await leg_execute(claim)
    finally:
        await call(token.release)
