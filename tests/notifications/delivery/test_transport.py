"""The guard on outgoing webhooks: where a delivery may connect, checked when each connection is made, with the
resolver and the network substituted, so no test makes a connection anywhere (a refused address must not even
be tried); and, against real servers on the loopback, that proxies and redirects are not followed."""

from __future__ import annotations

import ipaddress

import httpcore
import pytest
from asgiref.sync import async_to_sync

from notifications.addresses import AddressPolicy, address_policy_current
from notifications.delivery.transport import WebhookSender
from notifications.models import OutboxMessage
from tests.factories import make_suspended_run

PUBLIC = AddressPolicy.PUBLIC
_NO_CONTENT = [b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"]


class RecordingNetwork(httpcore.AsyncNetworkBackend):
    """Records every connection asked of it and answers each with a 204, over no socket at all."""

    def __init__(self) -> None:
        self.connections: list[tuple[str, int]] = []

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        self.connections.append((host, port))
        return httpcore.AsyncMockStream(list(_NO_CONTENT))

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise AssertionError("no Unix socket")

    async def sleep(self, seconds):
        pass


class Resolver:
    """Answers each lookup of a name with the next of its answers; records the names looked up."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int):
        self.lookups.append(host)
        return [ipaddress.ip_address(address) for address in self.answers.pop(0)]


def post(url: str, *, policy, resolver=None, network=None):
    async def once():
        async with WebhookSender(policy=policy, resolver=resolver or Resolver(), network=network) as sender:
            return await sender.post(url, body=b"{}", headers={"content-type": "application/json"})

    return async_to_sync(once)()


def test_a_name_that_resolves_to_a_private_address_is_refused_without_a_connection():
    network, resolver = RecordingNetwork(), Resolver(["10.0.0.7"])
    answer = post("https://hooks.example.com/in", policy=PUBLIC, resolver=resolver, network=network)
    assert network.connections == []
    assert resolver.lookups == ["hooks.example.com"]
    assert answer.status_code is None and "10.0.0.7 is a private address" in answer.error


def test_a_public_address_is_connected_to_under_the_public_rule():
    network = RecordingNetwork()
    answer = post("http://hooks.example.com:8080/in", policy=PUBLIC, resolver=Resolver(["93.184.216.34"]),
                  network=network)
    assert network.connections == [("93.184.216.34", 8080)]  # the checked address, not the name
    assert answer.is_delivered


def test_every_address_of_a_name_is_checked():
    network = RecordingNetwork()
    answer = post("http://hooks.example.com/", policy=PUBLIC, resolver=Resolver(["93.184.216.34", "::ffff:10.0.0.1"]),
                  network=network)
    assert network.connections == []
    assert "::ffff:10.0.0.1 is a private address" in answer.error


@pytest.mark.parametrize("address, kind", [
    ("127.0.0.1", "loopback"), ("::1", "loopback"), ("::ffff:127.0.0.1", "loopback"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"), ("::ffff:169.254.169.254", "link-local"),
    ("192.168.1.10", "private"), ("100.64.0.1", "private"), ("fd00::1", "private"),
    ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
    ("2002:a00:1::1", "private"),  # 6to4 of 10.0.0.1
    ("0.0.0.0", "not unicast"), ("ff02::1", "not unicast"),
])
def test_an_address_that_is_not_public_is_refused_under_the_public_rule(address, kind):
    network = RecordingNetwork()
    answer = post("http://hooks.example.com/", policy=PUBLIC, resolver=Resolver([address]), network=network)
    assert network.connections == []
    assert f"is a {kind} address" in answer.error


def test_a_literal_address_is_checked_as_well():
    network = RecordingNetwork()
    answer = post("http://[::ffff:10.1.2.3]:8000/", policy=PUBLIC, network=network)
    assert network.connections == [] and "private address" in answer.error


def test_a_name_that_resolves_elsewhere_later_is_caught_at_its_next_connection():
    network, resolver = RecordingNetwork(), Resolver(["93.184.216.34"], ["10.0.0.1"])

    async def twice():
        async with WebhookSender(policy=PUBLIC, resolver=resolver, network=network) as sender:
            first = await sender.post("http://hooks.example.com/", body=b"{}", headers={})
            second = await sender.post("http://hooks.example.com/", body=b"{}", headers={})
        return first, second

    first, second = async_to_sync(twice)()
    assert first.is_delivered and "10.0.0.1 is a private address" in second.error
    assert network.connections == [("93.184.216.34", 80)]


def test_allowing_private_addresses_allows_them_but_never_an_unusable_one():
    network = RecordingNetwork()
    allowed = post("http://hooks.internal/", policy=AddressPolicy.PUBLIC_AND_PRIVATE,
                   resolver=Resolver(["10.0.0.8"]), network=network)
    unusable = post("http://hooks.internal/", policy=AddressPolicy.PUBLIC_AND_PRIVATE,
                    resolver=Resolver(["0.0.0.0"]), network=network)
    assert allowed.is_delivered and "not unicast" in unusable.error
    assert network.connections == [("10.0.0.8", 80)]


def test_the_loopback_rule_refuses_a_public_address_and_looks_no_name_up():
    network, resolver = RecordingNetwork(), Resolver(["127.0.0.1"])
    public = post("http://93.184.216.34/", policy=AddressPolicy.LOOPBACK_ONLY, resolver=resolver, network=network)
    named = post("http://hooks.example.com/", policy=AddressPolicy.LOOPBACK_ONLY, resolver=resolver, network=network)
    assert "with DEBUG on, webhooks go to loopback addresses only" in public.error
    assert "is not looked up" in named.error
    assert network.connections == [] and resolver.lookups == []


def test_localhost_is_the_loopback_without_a_lookup():
    network, resolver = RecordingNetwork(), Resolver()
    answer = post("http://localhost:8123/", policy=AddressPolicy.LOOPBACK_ONLY, resolver=resolver, network=network)
    assert answer.is_delivered
    assert network.connections == [("127.0.0.1", 8123)] and resolver.lookups == []


def test_the_test_suite_delivers_to_loopback_addresses_only():
    # The test runner turns DEBUG off for each test; the rule is DEBUG's as the process started.
    assert address_policy_current() == AddressPolicy.LOOPBACK_ONLY


@pytest.mark.parametrize("debug, loopback_only, allow_private, policy", [
    (True, False, True, AddressPolicy.LOOPBACK_ONLY),
    (False, False, False, AddressPolicy.PUBLIC),
    (False, False, True, AddressPolicy.PUBLIC_AND_PRIVATE),
    (False, True, True, AddressPolicy.LOOPBACK_ONLY),
])
def test_the_settings_choose_the_rule(settings, debug, loopback_only, allow_private, policy):
    settings.DEBUG, settings.DEUZ_WEBHOOK_LOOPBACK_ONLY = debug, loopback_only
    settings.DEUZ_WEBHOOK_ALLOW_PRIVATE = allow_private
    assert address_policy_current() == policy


# Through the outbox, as a worker delivers: refused subscriptions are logged, and nothing is connected to.


@pytest.mark.django_db(transaction=True)
def test_under_the_suites_rule_a_public_address_and_a_public_name_are_refused_without_a_connection(
        users, subscribe, drain_runs, deliver):
    address = subscribe(users["owner"], events=["run.suspended"], url="https://93.184.216.34/hooks")
    name = subscribe(users["owner"], events=["run.suspended"], url="https://hooks.example.com/hooks")
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    network, resolver = RecordingNetwork(), Resolver(["93.184.216.34"])
    assert deliver(network=network, resolver=resolver) == 2
    assert network.connections == [] and resolver.lookups == []
    assert "93.184.216.34 is a public address, and with DEBUG on" in last_error(address)
    assert "hooks.example.com is not looked up" in last_error(name)


@pytest.mark.django_db(transaction=True)
def test_with_debug_off_a_name_that_resolves_to_a_private_address_is_refused_without_a_connection(
        users, subscribe, drain_runs, deliver, settings):
    settings.DEUZ_WEBHOOK_LOOPBACK_ONLY = False  # DEBUG is off in tests: the production rule
    subscription = subscribe(users["owner"], events=["run.suspended"], url="https://hooks.example.com/hooks")
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    network = RecordingNetwork()
    assert deliver(network=network, resolver=Resolver(["10.0.0.5"])) == 1
    assert network.connections == []
    assert "hooks.example.com resolves to 10.0.0.5: 10.0.0.5 is a private address" in last_error(subscription)
    assert OutboxMessage.objects.get().status == OutboxMessage.Status.PENDING  # retried: the name may move


def last_error(subscription) -> str:
    return OutboxMessage.objects.get(subscription=subscription).attempts.order_by("number").last().error


# Real servers on the loopback.


def test_a_redirect_is_not_followed(receiver):
    target, redirecting = receiver(), receiver(307)
    redirecting.redirect_to = target.url
    answer = post(redirecting.url, policy=AddressPolicy.LOOPBACK_ONLY)
    assert answer.status_code == 307 and "redirects are not followed" in answer.error
    assert target.deliveries == [] and len(redirecting.deliveries) == 1


def test_proxies_from_the_environment_are_not_used(receiver, monkeypatch):
    hooks, proxy = receiver(), receiver()
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    answer = post(hooks.url, policy=AddressPolicy.LOOPBACK_ONLY)
    assert answer.is_delivered
    assert len(hooks.deliveries) == 1 and proxy.deliveries == []


def test_no_answer_within_the_timeout_is_a_failed_attempt(receiver):
    slow = receiver("hang", hang_seconds=2)

    async def once():
        async with WebhookSender(policy=AddressPolicy.LOOPBACK_ONLY, timeout=0.2) as sender:
            return await sender.post(slow.url, body=b"{}", headers={})

    answer = async_to_sync(once)()
    assert answer.status_code is None and answer.error == "No answer within 0.2 s."


def test_a_closed_port_is_a_failed_attempt(receiver):
    gone = receiver()
    gone.stop()
    answer = post(gone.url, policy=AddressPolicy.LOOPBACK_ONLY)
    assert answer.status_code is None and answer.error.startswith("Could not connect")
