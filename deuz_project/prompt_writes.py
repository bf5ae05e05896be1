"""Writes that leave at once: daphne's TCP connections send a write straight to the socket when nothing is
waiting to be written before it, rather than at the reactor's next pass over writable sockets.

Twisted buffers every write and sends it only when the event loop next reports the socket writable, after
every callback already queued. When a run's notification wakes hundreds of followers at once, the frames
made first wait for all the others to be made before any leaves: the fan-out's last parts took 40-50 ms
from being made to reaching a follower. asyncio's own transports try the socket first; this does the same
for Twisted's TCP connections (an `ssl:` endpoint's TLS layer writes through them; a connection that calls
startTLS itself is left alone), keeping Twisted's buffering for whatever the socket does not take at once, so
the order of the bytes is kept.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

from twisted.internet import tcp

__all__ = ["PromptServer", "prompt_writes_install"]


class PromptServer(tcp.Server):
    """A server-side TCP connection whose writes go to the socket at once when its buffer is empty."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A response's head and body now leave as separate sends: with Nagle's algorithm on, the second would wait
        # for the peer's delayed ACK (about 40 ms). twisted.web and autobahn turn it off too; this does not rely
        # on them.
        try:
            self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def write(self, data: bytes) -> None:
        if type(data) is bytes and data and self._has_nothing_waiting():
            data = data[self._send_some(data):]
        super().write(data)

    def writeSequence(self, iovec: Iterable[bytes]) -> None:
        iovec = list(iovec)
        if all(type(item) is bytes for item in iovec) and self._has_nothing_waiting():
            self.write(b"".join(iovec))
            return
        super().writeSequence(iovec)

    def _has_nothing_waiting(self) -> bool:
        """A plain connection, open for writing, with nothing buffered (so the bytes keep their order)."""
        return (not self.TLS and self.connected and not self.disconnecting and not self._aborting
                and not self._writeDisconnecting and not self._writeDisconnected
                # A pull producer is asked for more only when a buffered write has gone: keep its writes buffered.
                and (self.producer is None or self.streamingProducer)
                and not self._tempDataLen and self.offset == len(self.dataBuffer))

    def _send_some(self, data: bytes) -> int:
        """Bytes the socket took at once; 0 when it would block or failed (the buffered write then finds out)."""
        try:
            return self.socket.send(data)
        except OSError:
            return 0


def prompt_writes_install() -> None:
    """Every TCP port listened on from now on makes PromptServer connections (daphne's, in `manage.py serve`)."""
    tcp.Port.transport = PromptServer
