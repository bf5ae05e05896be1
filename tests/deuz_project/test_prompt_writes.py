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


def test_a_write_after_an_abort_is_dropped_as_twisted_drops_it(connection):
    server, peer, reactor = connection
    server._aborting = True  # abortConnection's mark until connectionLost runs on the next pass
    server.write(b"after the abort")
    assert _received(peer) == b""


class _PullProducer:
    """A producer Twisted asks for more only once a buffered write has gone (resumeProducing, from doWrite)."""

    def __init__(self) -> None:
        self.asked = 0

    def resumeProducing(self) -> None:
        self.asked += 1

    def stopProducing(self) -> None:
        pass


def test_a_pull_producers_writes_stay_buffered_so_it_is_asked_for_more(connection):
    server, peer, reactor = connection
    producer = _PullProducer()
    server.registerProducer(producer, False)  # asked once at once, as Twisted does
    server.write(b"chunk 1")
    assert reactor.writers == {server} and _received(peer) == b""
    server.doWrite()  # the socket is writable: the chunk goes and the producer is asked for the next
    assert _received(peer) == b"chunk 1" and producer.asked == 2


def test_a_peer_gone_is_still_found_by_the_buffered_write(connection):
    server, peer, reactor = connection
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # close with a reset
    peer.close()
    server.write(b"x" * 100)  # the send fails: kept for Twisted's write, which reports the loss
    server.write(b"y" * 100)
    assert reactor.writers == {server}
    assert isinstance(server.doWrite(), BaseException)  # ConnectionLost: the reactor then calls connectionLost


def test_nagle_is_off_so_a_head_and_a_body_sent_apart_do_not_wait_for_an_ack():
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    accepted, address = listener.accept()
    server = PromptServer(accepted, protocol.Protocol(), address, None, 1, _Reactor())
    try:
        assert server.socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        for sock in (accepted, client, listener):
            sock.close()
