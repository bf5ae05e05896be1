"""Where webhooks may go: the URLs a subscription may name, and the addresses a delivery may connect to.

A URL is checked for its shape when a subscription is made (http or https, a host, no credentials, no fragment);
where it leads is checked each time a connection is made (notifications.delivery.transport), since a name can
resolve elsewhere later. Every address a name resolves to is checked, IPv6 ones included, an IPv4 address inside
an IPv6 one (IPv4-mapped, 6to4, NAT64) by the IPv4 address it carries:

  loopback only    (DEBUG on: development and the test suite) loopback addresses; no name is looked up but
                   localhost, so a development install sends no request, not even a DNS query, anywhere else
  public           (DEBUG off) public unicast addresses only: loopback, link-local and private ones are refused
  public and private   (DEBUG off, DEUZ_WEBHOOK_ALLOW_PRIVATE=1) loopback, link-local and private ones too
"""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum

from django.conf import settings
from django.core.validators import RegexValidator

__all__ = [
    "AddressPolicy",
    "IPAddress",
    "LOCALHOST_ADDRESSES",
    "WEBHOOK_URL_VALIDATOR",
    "address_kind",
    "address_policy_current",
    "address_refusal",
    "host_literal",
    "host_refusal",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: What "localhost" (and any name under .localhost) is, without asking a resolver (RFC 6761, section 6.3).
LOCALHOST_ADDRESSES: tuple[IPAddress, ...] = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class AddressPolicy(StrEnum):
    LOOPBACK_ONLY = "loopback only"
    PUBLIC = "public"
    PUBLIC_AND_PRIVATE = "public and private"


def address_policy_current() -> AddressPolicy:
    """The rule the settings give (DEBUG, DEUZ_WEBHOOK_LOOPBACK_ONLY, DEUZ_WEBHOOK_ALLOW_PRIVATE)."""
    if settings.DEBUG or settings.DEUZ_WEBHOOK_LOOPBACK_ONLY:
        return AddressPolicy.LOOPBACK_ONLY
    return AddressPolicy.PUBLIC_AND_PRIVATE if settings.DEUZ_WEBHOOK_ALLOW_PRIVATE else AddressPolicy.PUBLIC


def _carried_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (IPv4-mapped, 6to4, NAT64), or None."""
    if address.version != 6:
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_kind(address: IPAddress) -> str:
    """``loopback``, ``link-local``, ``private``, ``public``, or ``not unicast`` (unspecified, multicast,
    broadcast: nothing to deliver to)."""
    address = _carried_ipv4(address) or address
    if address.is_loopback:
        return "loopback"
    if address.is_unspecified or address.is_multicast or address == ipaddress.IPv4Address("255.255.255.255"):
        return "not unicast"
    if address.is_link_local:
        return "link-local"
    if address.is_global:
        return "public"
    return "private"  # RFC 1918, unique local, shared, reserved, documentation ranges...


_ALLOWED = {
    AddressPolicy.LOOPBACK_ONLY: {"loopback"},
    AddressPolicy.PUBLIC: {"public"},
    AddressPolicy.PUBLIC_AND_PRIVATE: {"public", "private", "loopback", "link-local"},
}

_WHY = {
    AddressPolicy.LOOPBACK_ONLY: "with DEBUG on, webhooks go to loopback addresses only",
    AddressPolicy.PUBLIC: "webhooks go to public addresses only (DEUZ_WEBHOOK_ALLOW_PRIVATE=1 allows private ones)",
    AddressPolicy.PUBLIC_AND_PRIVATE: "a webhook needs a unicast address",
}


def address_refusal(address: IPAddress, *, policy: AddressPolicy) -> str | None:
    """Why a delivery may not connect to ``address`` under ``policy``, or None when it may."""
    kind = address_kind(address)
    if kind in _ALLOWED[policy]:
        return None
    return f"{address} is a {kind} address, and {_WHY[policy]}."


def host_literal(host: str) -> IPAddress | None:
    """The address ``host`` spells (an IPv6 one with or without its brackets), or None for a name."""
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return None


def host_refusal(host: str, *, policy: AddressPolicy) -> str | None:
    """Why ``host``, a name, may not even be looked up under ``policy`` (only localhost is, on the loopback-only
    rule), or None."""
    name = host.lower().rstrip(".")
    if policy == AddressPolicy.LOOPBACK_ONLY and name != "localhost" and not name.endswith(".localhost"):
        return f"{host} is not looked up: {_WHY[policy]} (name them by a loopback address or localhost)."
    return None


def _ipv6_pattern() -> str:
    """RFC 3986's IPv6address, as a regular expression."""
    h16, ipv4 = "[0-9A-Fa-f]{1,4}", r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}" \
        r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
    ls32 = f"(?:{h16}:{h16}|{ipv4})"
    forms = [f"(?:{h16}:){{6}}{ls32}", f"::(?:{h16}:){{5}}{ls32}"]
    for before, after in ((0, 4), (1, 3), (2, 2), (3, 1)):
        head = f"(?:{h16})" if before == 0 else f"(?:(?:{h16}:){{0,{before}}}{h16})"
        forms.append(f"{head}?::(?:{h16}:){{{after}}}{ls32}")
    forms.append(f"(?:(?:{h16}:){{0,4}}{h16})?::{ls32}")
    forms.append(f"(?:(?:{h16}:){{0,5}}{h16})?::{h16}")
    forms.append(f"(?:(?:{h16}:){{0,6}}{h16})?::")
    return "(?:" + "|".join(forms) + ")"


_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_PORT = "(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
#: printable ASCII but space and "#": a path and query, never a fragment (it is not sent anyway).
_PATH = "(?:/[!-\"$-~]*)?"
WEBHOOK_URL_PATTERN = (
    rf"^https?://(?:{_LABEL}(?:\.{_LABEL})*\.?|\[{_ipv6_pattern()}\])(?::{_PORT})?{_PATH}\Z"
)

#: The shape of a subscription's URL (the OpenAPI document gives the same pattern): http(s), a host name or
#: address, an optional port, a path; no credentials, no fragment.
WEBHOOK_URL_VALIDATOR = RegexValidator(
    re.compile(WEBHOOK_URL_PATTERN),
    "Give an http:// or https:// URL with a host name or address (no user name or password, no #fragment).",
)
