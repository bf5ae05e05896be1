"""daphne's connections under `manage.py serve` (deuz_project.prompt_writes): a write on a connection with nothing
waiting goes to the socket at once; anything else keeps Twisted's buffering, and the bytes keep their order.

The connections here are real sockets (a connected pair); the reactor is a stand-in that records which
connections asked to be told when they may write, since nothing here runs its loop."""

from __future__ import annotations

import socket

import pytest
from twisted.internet import protocol

from deuz_project.prompt_writes import PromptServer


class _Reactor:
    """What a connection asks of its reactor: to be read from, to be written to (recorded), and no more."""

    def __init__(self) -> None:
        self.writers: set = set()

    def addReader(self, reader) -> None:
        pass

    def removeReader(self, reader) -> None:
        pass

    def addWriter(self, writer) -> None:
        self.writers.add(writer)

    def removeWriter(self, writer) -> None:
        self.writers.discard(writer)


@pytest.fixture
def connection():
    """A PromptServer on one end of a socket pair, the peer's end, and the reactor stand-in."""
    ours, peer = socket.socketpair()
    reactor = _Reactor()
    server = PromptServer(ours, protocol.Protocol(), ("127.0.0.1", 50000), None, 1, reactor)
    server.connected = True
    peer.setblocking(False)
    yield server, peer, reactor
    ours.close()
    peer.close()


def _received(peer: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            chunk = peer.recv(1 << 20)
        except BlockingIOError:
            return b"".join(chunks)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def test_a_write_on_an_idle_connection_reaches_the_peer_before_the_reactor_runs(connection):
    server, peer, reactor = connection
    server.write(b"data: one\n\n")
    assert _received(peer) == b"data: one\n\n"
    assert reactor.writers == set()  # nothing was left for the reactor to send


def test_a_write_sequence_on_an_idle_connection_leaves_at_once_in_its_order(connection):
    server, peer, reactor = connection
    server.writeSequence([b"5\r\n", b"hello", b"\r\n"])
    assert _received(peer) == b"5\r\nhello\r\n" and reactor.writers == set()


def test_what_the_socket_does_not_take_is_buffered_and_what_follows_waits_behind_it(connection):
    server, peer, reactor = connection
    big = bytes(range(256)) * 40_000  # 10 MB: more than a socket pair's buffers hold
    server.write(big)
    assert reactor.writers == {server}  # the rest waits for the socket to be writable
    server.write(b"after")  # must not jump the queue
    received = _received(peer)
    assert 0 < len(received) < len(big)
    while len(received) < len(big) + len(b"after"):
        server.doWrite()  # as the reactor does when the socket is writable
        received += _received(peer)
    assert received == big + b"after" and reactor.writers == set()


def test_a_write_after_the_connection_is_being_closed_is_left_to_twisted(connection):
    server, peer, reactor = connection
    server.disconnecting = True
    server.write(b"late")
    assert _received(peer) == b"" and reactor.writers == {server}
