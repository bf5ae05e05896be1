"""Sending one webhook: a POST through a connection pool whose every connection goes to a checked address.

The pool is httpcore's (the transport under httpx) with a network back end of its own: when a connection is made
it resolves the URL's host itself, checks every address it got (notifications.addresses) and connects to a
checked one, so a name that resolves elsewhere by then is caught; TLS still verifies the certificate for the
URL's host name (SNI), and the Host header names it too. httpcore reads no proxy variables from the environment
(what httpx's ``trust_env=False`` turns off) and never follows a redirect: a 3xx is an answer like any non-2xx.
Each attempt has 10 seconds, from the name's lookup to the answer's status line.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore

from notifications.addresses import (
    LOCALHOST_ADDRESSES,
    AddressPolicy,
    IPAddress,
    address_policy_current,
    address_refusal,
    host_literal,
    host_refusal,
)
from notifications.errors import AddressRefused

__all__ = ["Answer", "CheckedNetworkBackend", "DELIVERY_TIMEOUT_SECONDS", "Resolver", "WebhookSender",
           "system_resolve"]

#: How long a receiver has to answer an attempt.
DELIVERY_TIMEOUT_SECONDS = 10.0
#: The most of an answer's body that is read (and thrown away) so its connection can serve the next attempt.
_BODY_READ_LIMIT = 64 * 1024
_USER_AGENT = "Deuz-Webhooks/1"

#: Looks a host name up: (host, port) -> its addresses.
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]


async def system_resolve(host: str, port: int) -> list[IPAddress]:
    """The host's addresses from the system's resolver, in its order, each once."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    found: dict[IPAddress, None] = {}
    for _family, _type, _proto, _name, address in infos:
        literal = host_literal(address[0].split("%", 1)[0])
        if literal is not None:
            found[literal] = None
    return list(found)


def _is_localhost(host: str) -> bool:
    name = host.lower().rstrip(".")
    return name == "localhost" or name.endswith(".localhost")


class CheckedNetworkBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network back end that connects only to addresses the policy allows, checked on each connect.

    ``policy`` None reads the settings' rule at each connection; ``resolver`` looks names up; ``network`` makes
    the connections (httpcore's own back end by default; a test passes one that records them)."""

    def __init__(self, *, policy: AddressPolicy | None = None, resolver: Resolver = system_resolve,
                 network: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.policy = policy
        self.resolver = resolver
        self.network = network or httpcore.AnyIOBackend()

    async def checked_addresses(self, host: str, port: int) -> list[IPAddress]:
        """Every address ``host`` stands for, once each is allowed; AddressRefused naming the first that is not."""
        policy = self.policy or address_policy_current()
        literal = host_literal(host)
        if literal is not None:
            addresses = [literal]
        elif refusal := host_refusal(host, policy=policy):
            raise AddressRefused(refusal)
        elif _is_localhost(host):
            addresses = list(LOCALHOST_ADDRESSES)
        else:
            try:
                addresses = await self.resolver(host, port)
            except OSError as exc:
                raise httpcore.ConnectError(f"{host} could not be looked up ({exc.strerror or exc}).") from None
            if not addresses:
                raise httpcore.ConnectError(f"{host} has no address.")
        for address in addresses:
            if refusal := address_refusal(address, policy=policy):
                raise AddressRefused(refusal if literal is not None else f"{host} resolves to {address}: {refusal}")
        return addresses

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        error: Exception | None = None
        for address in await self.checked_addresses(host, port):
            try:
                return await self.network.connect_tcp(str(address), port, timeout=timeout,
                                                      local_address=local_address, socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:  # the next address, as a browser would
                error = exc
        raise error or httpcore.ConnectError(f"{host} has no address.")

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise AddressRefused("Webhooks are not delivered over Unix sockets.")

    async def sleep(self, seconds: float) -> None:
        await self.network.sleep(seconds)


@dataclass(frozen=True)
class Answer:
    """How one attempt went: the receiver's status (None when there was no answer) and, unless 2xx, why not."""

    status_code: int | None
    error: str
    duration_ms: int

    @property
    def is_delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class WebhookSender:
    """POSTs webhooks through one checked connection pool; close it with ``aclose`` (or ``async with``)."""

    def __init__(self, *, policy: AddressPolicy | None = None, resolver: Resolver = system_resolve,
                 network: httpcore.AsyncNetworkBackend | None = None, timeout: float = DELIVERY_TIMEOUT_SECONDS,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.timeout = timeout
        self.backend = CheckedNetworkBackend(policy=policy, resolver=resolver, network=network)
        self.pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context or ssl.create_default_context(), network_backend=self.backend,
            max_connections=20, keepalive_expiry=5.0, retries=0,
        )

    async def __aenter__(self) -> WebhookSender:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.pool.aclose()

    async def post(self, url: str, *, body: bytes, headers: dict[str, str]) -> Answer:
        """One attempt: POST ``body`` with ``headers`` to ``url``, never raising for what the receiver or the
        network did."""
        started = time.monotonic()
        status, error = None, ""
        try:
            async with asyncio.timeout(self.timeout):
                status = await self._post(url, body, headers)
        except AddressRefused as exc:
            error = f"Not sent: {exc}"
        except (TimeoutError, httpcore.TimeoutException):
            error = f"No answer within {self.timeout:g} s."
        except httpcore.ConnectError as exc:
            error = f"Could not connect: {exc or 'the connection was refused'}"
        except (httpcore.NetworkError, httpcore.ProtocolError) as exc:
            error = f"The connection failed: {type(exc).__name__}{f' ({exc})' if str(exc) else ''}."
        except ValueError as exc:  # a URL httpcore cannot use (its shape was checked when it was saved)
            error = f"Not sent: the URL cannot be used ({exc})."
        duration_ms = int((time.monotonic() - started) * 1000)
        if status is not None and not 200 <= status < 300:
            error = f"The receiver answered {status}" + (" (redirects are not followed)." if 300 <= status < 400
                                                         else ".")
        return Answer(status_code=status, error=error, duration_ms=duration_ms)

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> int:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
            raise AddressRefused("webhooks go to http:// or https:// URLs with a host and no credentials.")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        request_url = httpcore.URL(scheme=parts.scheme.encode(), host=parts.hostname.encode("ascii"),
                                   port=parts.port, target=target.encode("ascii"))
        request_headers = [(b"Host", parts.netloc.encode("ascii")), (b"User-Agent", _USER_AGENT.encode())]
        request_headers += [(name.encode("ascii"), value.encode("ascii")) for name, value in headers.items()]
        timeout = {"connect": self.timeout, "read": self.timeout, "write": self.timeout, "pool": self.timeout}
        async with self.pool.stream("POST", request_url, headers=request_headers, content=body,
                                    extensions={"timeout": timeout}) as response:
            read = 0
            async for chunk in response.aiter_stream():
                read += len(chunk)
                if read > _BODY_READ_LIMIT:
                    break
            return response.status
