"""Following a run's journal from a web process: the one follower core of the Server-Sent Events view and the
WebSocket consumer, which only turn its frames into their wire format.

The core decides, in this order and the same way for both: who the user is (401), the cursor (400), whether
the run id is valid, exists and is readable by the user (404 for all three, so run ids cannot be probed), and
whether the user has a stream left (429, ``DEUZ_MAX_STREAMS_PER_USER`` per process); a database that is down
is a 503, worth a retry. Then it follows the journal (runs.runtime.wire.follow_journal), strips approval
tokens for users who may not decide, and ends a failed follow with one redacted error part. Every read after
the setup goes through runs.wire.reads, so followers hold no database connection of their own while they
wait.

A follower that finds the run's producer gone continues the run through the ``continuation`` its door gives it
(runs.execution.continuation: claim the run as a worker would, and run its leg on this event loop); the wire
itself never runs a leg, so it sits below the legs that write to it.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import re
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import InterfaceError, OperationalError, connection
from django.http import StreamingHttpResponse
from django.utils import timezone

from approvals.roles import approval_is_decidable_by
from runs.access import run_is_readable_by
from runs.wire.reads import close_connections, follower_reads
from runs.wire.tails import Listener
from runs.models import RUN_ID_VALIDATOR, Run
from runs.ownership.liveness import liveness_owners_dead
from runs.runtime.codec import encode_value
from runs.runtime.exceptions import StoreUnavailableError
from runs.runtime.loops import error_part
from runs.runtime.redact import redact
from runs.runtime.types import StreamPart
from runs.runtime.wire import DONE, IDLE, FollowState, JournalPage, follow_journal_batches
from runs.secrets.redaction import service_secrets
from runs.stores import get_store

__all__ = [
    "DEFAULT_MAX_STREAMS_PER_USER",
    "Continuation",
    "Follow",
    "FollowRefused",
    "FollowResponse",
    "Frame",
    "FrameKind",
    "follow_open",
    "follower_secrets",
    "open_followers",
    "parse_cursor",
    "part_json",
]

logger = logging.getLogger("deuz.followers")

DEFAULT_MAX_STREAMS_PER_USER = 20

# -1 (nothing seen) or a seq; at most 18 digits, so it always fits PostgreSQL's bigint (a larger one is a DataError).
_CURSOR = re.compile(r"-1|[0-9]{1,18}")

# Errors of a database or a store that is down or restarting: the client's reconnect may well succeed.
_TRANSIENT = (OperationalError, InterfaceError, StoreUnavailableError, ConnectionError, TimeoutError)

_PAGE = 500  # parts per journal read

#: How a follower gets a dead run continued: ``continuation(run_id, kind=..., call=...)``, where ``call(function,
#: *args)`` runs a blocking function the way the follower runs its own reads.
Continuation = Callable[..., Awaitable[None]]


def _journal_store():
    """The journal store followers read: the ``streams`` alias of DEUZ_STORES."""
    return get_store("streams")


#: The secrets a follower redacts (runs.secrets.redaction, the one list).
follower_secrets = service_secrets


class FollowRefused(Exception):
    """Why a follower may not follow: an HTTP status (the SSE answer) and its WebSocket close code, 4000 + status."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail

    @property
    def close_code(self) -> int:
        return 4000 + self.status


def _not_found(run_id: str) -> FollowRefused:
    return FollowRefused(404, f"No run {run_id[:200]!r}.")


def parse_cursor(raw: str | None) -> int:
    """The last seq a follower has seen (-1 for none) from ``Last-Event-ID`` or ``?cursor=``."""
    if raw is None or raw == "":
        return -1
    if not _CURSOR.fullmatch(raw):
        raise FollowRefused(400, "The cursor must be a whole number of at least -1.")
    return int(raw)


class _StreamSlots:
    """Open streams per user in this process, so one user cannot hold every connection of the server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[Any, int] = {}

    def take(self, user_pk: Any) -> None:
        limit = int(getattr(settings, "DEUZ_MAX_STREAMS_PER_USER", DEFAULT_MAX_STREAMS_PER_USER))
        with self._lock:
            if self._open.get(user_pk, 0) >= limit:
                raise FollowRefused(429, f"Too many open streams: at most {limit} at a time per user; close one first.")
            self._open[user_pk] = self._open.get(user_pk, 0) + 1

    def give_back(self, user_pk: Any) -> None:
        with self._lock:
            left = self._open.pop(user_pk) - 1
            if left:
                self._open[user_pk] = left

    def total(self) -> int:
        with self._lock:
            return sum(self._open.values())


_slots = _StreamSlots()


def open_followers() -> int:
    """Streams (SSE and WebSocket) open in this process."""
    return _slots.total()

# At most this many setups (authentication and the run's lookup) hold a connection of their own at once.
_setup_gate = threading.BoundedSemaphore(4)


@dataclass(frozen=True)
class _Grant:
    cursor: int
    user_pk: Any
    may_see_tokens: bool
    is_in_transaction: bool


def _setup(run_id: str, cursor: str | None, authenticate: Callable[[], Any]) -> _Grant:
    """The checks before following, on the caller's thread (so a test's transaction sees its own rows); the
    connection is closed afterwards, since a follower may wait for hours."""
    with _setup_gate:
        try:
            user = authenticate()
            if user is None or not user.is_authenticated:
                raise FollowRefused(401, "Authentication credentials were not provided.")
            seen = parse_cursor(cursor)
            try:
                RUN_ID_VALIDATOR(run_id)
            except ValidationError:
                raise _not_found(run_id) from None
            run = Run.objects.filter(run_id=run_id).only("pk", "created_by_id", "agent").first()
            if run is None or not run_is_readable_by(run, user=user):
                raise _not_found(run_id)
            return _Grant(cursor=seen, user_pk=user.pk, may_see_tokens=approval_is_decidable_by(user=user, run=run),
                          is_in_transaction=connection.in_atomic_block)
        finally:
            close_connections()


async def follow_open(
    *, run_id: str, cursor: str | None, authenticate: Callable[[], Any], kind: str,
    continuation: Continuation | None = None,
) -> Follow:
    """A Follow of ``run_id`` for the user ``authenticate()`` answers (a blocking call, run on a thread), or
    FollowRefused. The Follow holds one of the user's streams until it is closed. Without a ``continuation`` a
    dead run is only waited for (another process continues it)."""
    try:
        grant = await sync_to_async(_setup)(run_id, cursor, authenticate)
    except _TRANSIENT as exc:
        logger.warning("A follower of run %s could not start: %s", run_id[:200], type(exc).__name__)
        raise FollowRefused(503, "The database is unavailable; try again shortly.") from None
    _slots.take(grant.user_pk)
    return Follow(run_id=run_id, grant=grant, kind=kind, continuation=continuation)


class FrameKind(enum.Enum):
    PART = "part"  # seq and part
    IDLE = "idle"  # nothing new for a while: a chance to send a keep-alive
    DONE = "done"  # the end of the turn
    FAILED = "failed"  # part is a redacted error part without a seq; is_final says whether retrying can help


def part_json(part: StreamPart) -> str:
    """A part as the wire's JSON text (the codec's markers, compact, UTF-8 as is), as the journal holds it."""
    return json.dumps(encode_value(part), ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Frame:
    kind: FrameKind
    seq: int | None = None
    part: StreamPart | None = None
    is_final: bool = False
    # The part's JSON when it came with a notification: one text per part in this process, shared by every
    # follower that may see the part as it is (no encode per follower on the hot path; issue 25).
    shared_json: str | None = None

    @property
    def json(self) -> str:
        """The part's JSON text (``part_json``): the shared one, else encoded for this frame."""
        return self.shared_json if self.shared_json is not None else part_json(self.part)


class Follow:
    """One follower of one run: its frames from the cursor to the end of the turn, then closed."""

    def __init__(self, *, run_id: str, grant: _Grant, kind: str, continuation: Continuation | None = None) -> None:
        self.run_id = run_id
        self.continuation = continuation
        self.cursor = grant.cursor
        self.may_see_tokens = grant.may_see_tokens
        self.kind = kind
        # Given back once, also when the Follow is dropped unclosed (a client gone between the view's return
        # and the first byte, when Django never closes the response).
        self._release = weakref.finalize(self, _slots.give_back, grant.user_pk)
        # Inside a transaction (a test's), reads stay on the caller's thread so they see its rows.
        self._read = sync_to_async if grant.is_in_transaction else None
        self._listener: Listener | None = None
        # How fresh a journal read must be (runs.wire.reads): begun once the look at where the run stands returned.
        self._fresh_after: float | None = None
        # The last journal page's parts with their JSON texts (``_read_page``): seq -> (part, text).
        self._page_texts: dict[int, tuple[StreamPart, str]] = {}

    def close(self) -> None:
        """Give the user's stream back; safe to call more than once."""
        self._release()

    async def _run(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` on the followers' read threads."""
        if self._read is not None:
            return await self._read(function)(*args)
        return await follower_reads().run(function, *args)

    async def _shared(self, function: Callable[..., Any], *args: Any,
                      fresh_after: float | None) -> tuple[Any, float | None]:
        """A read every follower of the run may share (runs.wire.reads), begun at or after ``fresh_after``: where
        it stands, or its journal. With when it returned (None inside a test's transaction: nothing shared)."""
        if self._read is not None:
            return await self._read(function)(*args), None
        return await follower_reads().run_shared(function, *args, fresh_after=fresh_after)

    async def frames(self) -> AsyncIterator[Frame]:
        """Replay, tail, get a dead run continued; a failure ends the frames with a redacted error part."""
        async with aclosing(self.batches()) as batches:
            async for batch in batches:
                for frame in batch:
                    yield frame

    async def batches(self) -> AsyncIterator[list[Frame]]:
        """``frames`` in lists, each what is known at once (runs.runtime.wire.follow_journal_batches), so a
        transport may send it in one write: a leg's last parts and its end, or a replay's page."""
        try:
            async with Listener(self.run_id) as listener:
                self._listener = listener
                batches = follow_journal_batches(read=self.read, state=self.state, wait=listener.wait,
                                                 continue_run=self.continue_run, cursor=self.cursor,
                                                 yield_idle=True, carried=listener.carried)
                async for items in batches:
                    yield [self._frame(item) for item in items]
                    if items and items[-1] == DONE:
                        return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            secrets = follower_secrets()
            logger.error("Following run %s failed: %s: %s", self.run_id, type(exc).__name__, redact(str(exc), secrets))
            # A database that is down may be back for the reconnect; any other error would only repeat.
            yield [Frame(FrameKind.FAILED, part=error_part(exc, secrets), is_final=not isinstance(exc, _TRANSIENT))]
        finally:
            self.close()

    def _frame(self, item: tuple[int, StreamPart] | str) -> Frame:
        if item == DONE:
            return Frame(FrameKind.DONE)
        if item == IDLE:
            return Frame(FrameKind.IDLE)
        seq, part = item
        visible = self.visible(part)
        shared = self._shared_text(seq, part) if visible is part else None
        return Frame(FrameKind.PART, seq=seq, part=visible, shared_json=shared)

    def _shared_text(self, seq: int, part: StreamPart) -> str | None:
        """The JSON text of ``part`` made once for every follower: with its notification, or by the journal read
        that brought it (on the read's thread, so a replay costs no encode per follower on the event loop)."""
        listener = self._listener
        if listener is not None and (text := listener.shared_json(seq, part)) is not None:
            return text
        read_part, text = self._page_texts.get(seq, (None, None))
        return text if read_part is part else None

    def visible(self, part: StreamPart) -> StreamPart:
        """``part`` as this follower may see it: approval tokens are bearer credentials for a decision."""
        if self.may_see_tokens or part.get("type") != "tool-approval-request":
            return part
        approval = part.get("approval")
        if not isinstance(approval, dict) or "token" not in approval:
            return part
        return {**part, "approval": {key: value for key, value in approval.items() if key != "token"}}

    async def read(self, after: int) -> JournalPage:
        listener = self._listener
        self._page_texts = {}  # the last page's frames are made: its texts are not kept while the follower waits
        if listener is not None and (page := listener.live_page(after)) is not None:
            return page
        (page, self._page_texts), _ = await self._shared(_read_page, self.run_id, after, fresh_after=self._fresh_after)
        if page.parts and listener is not None:
            listener.heard()
        return page

    async def state(self) -> FollowState:
        listener = self._listener
        if listener is not None and (state := listener.live_state()) is not None:
            self._fresh_after = listener.news_at  # a notification's parts were committed before it was heard
            return state
        state, self._fresh_after = await self._shared(_follow_state, self.run_id,
                                                      fresh_after=listener.news_at if listener else None)
        return state

    async def continue_run(self) -> None:
        """The producer is gone: have the run continued (the lease is the one lock, so at most one continuation
        runs, whatever the number of followers)."""
        if self.continuation is not None:
            await self.continuation(self.run_id, kind=self.kind, call=self._run)


class FollowResponse(StreamingHttpResponse):
    """A Server-Sent Events response of one Follow's frames as ``events`` renders them (the run events view's, the
    UI message stream's); the Follow is given back when Django closes the response: when the client goes too, and
    also when the stream never started (then the generator's own clean-up never runs)."""

    def __init__(self, follow: Follow, events: AsyncIterator[str], **options: Any) -> None:
        super().__init__(events, content_type="text/event-stream", **options)
        self.follow = follow

    def close(self) -> None:
        try:
            self.follow.close()
        finally:
            super().close()


def _read_page(run_id: str, after: int) -> tuple[JournalPage, dict[int, tuple[StreamPart, str]]]:
    """A page of the journal, with each part's JSON text (``part_json``'s): the journal's own text when the store
    gives it (runs.stores.streams), else encoded once by the read, which every follower of the run may share,
    never by each follower that replays it."""
    # On a thread with no event loop, so the store's read answers at once (runs.runtime.wire.StreamStateStore).
    store = _journal_store()
    if (read_texts := getattr(store, "read_texts_sync", None)) is not None:
        page, texts = read_texts(run_id, after, _PAGE)
        return page, {seq: (part, texts[seq]) for seq, part in page.parts}
    page = store.read(run_id, after=after, limit=_PAGE)
    return page, {seq: (part, part_json(part)) for seq, part in page.parts}


def _follow_state(run_id: str) -> FollowState:
    row = Run.objects.filter(run_id=run_id).values("status", "lease_expires_at", "worker_id").first()
    if row is None:
        return FollowState(is_active=False, is_producer_gone=False)
    is_active = row["status"] in (Run.Status.QUEUED, Run.Status.RUNNING)
    lease, owner = row["lease_expires_at"], row["worker_id"]
    # Gone: its lease lapsed, or its owner's liveness token is free (its process died). The owner is watched, so
    # its death wakes this process's followers (runs.wire.tails) rather than waiting for their next poll.
    is_gone = row["status"] == Run.Status.RUNNING and (
        lease is None or lease < timezone.now() or bool(owner and liveness_owners_dead({owner}, watch=True)))
    return FollowState(is_active=is_active, is_producer_gone=is_gone)
