"""The webhooks API: a user makes, lists and deletes their own subscriptions, sees each one's deliveries, and
gets its secret once; another user's subscription does not exist for them; bad input is a 400 with field
errors; the OpenAPI document describes every endpoint with every status it sends."""

from __future__ import annotations

import logging

import pytest
from cryptography.fernet import Fernet
from django.test import Client
from rest_framework.test import APIClient
from standardwebhooks import Webhook

from notifications.models import WebhookSubscription
from tests.factories import make_suspended_run

HOOK = {"url": "http://127.0.0.1:9999/hooks", "events": ["run.completed", "approval.requested"]}


@pytest.fixture
def owner_client(token_client, users):
    return token_client(users["owner"])


@pytest.mark.django_db
def test_a_subscription_is_made_with_its_secret_shown_once(owner_client):
    answer = owner_client.post("/api/webhooks/", {**HOOK, "description": "CI"}, format="json")
    assert answer.status_code == 201
    body = answer.json()
    assert (body["url"], body["events"], body["description"]) == (HOOK["url"], ["run.completed",
                                                                               "approval.requested"], "CI")
    assert body["secret"].startswith("whsec_")
    Webhook(body["secret"])  # a secret standardwebhooks accepts
    listed = owner_client.get("/api/webhooks/").json()
    assert listed["count"] == 1 and "secret" not in listed["results"][0]
    assert body["secret"] not in str(listed)


@pytest.mark.django_db
def test_each_subscription_has_its_own_secret(owner_client):
    first, second = (owner_client.post("/api/webhooks/", HOOK, format="json").json() for _ in range(2))
    assert first["secret"] != second["secret"]


@pytest.mark.django_db
def test_an_event_named_twice_counts_once(owner_client):
    answer = owner_client.post("/api/webhooks/", {**HOOK, "events": ["run.failed", "run.failed"]}, format="json")
    assert answer.json()["events"] == ["run.failed"]


@pytest.mark.django_db
def test_the_secret_is_stored_sealed_when_encryption_keys_are_set(owner_client, settings):
    settings.DEUZ_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    secret = owner_client.post("/api/webhooks/", HOOK, format="json").json()["secret"]
    stored = WebhookSubscription.objects.get()
    assert secret not in stored.secret_sealed and stored.secret == secret


@pytest.mark.django_db
@pytest.mark.parametrize("body, field", [
    ({**HOOK, "url": "ftp://example.com/hooks"}, "url"),
    ({**HOOK, "url": "http:///hooks"}, "url"),
    ({**HOOK, "url": "https://user:password@example.com/hooks"}, "url"),
    ({**HOOK, "url": "https://example.com/hooks#part"}, "url"),
    ({**HOOK, "url": "example.com/hooks"}, "url"),
    ({**HOOK, "url": 5}, "url"),
    ({**HOOK, "events": ["run.exploded"]}, "events"),
    ({**HOOK, "events": []}, "events"),
    ({**HOOK, "events": "run.completed"}, "events"),
    ({"url": HOOK["url"]}, "events"),
    ({**HOOK, "description": "x" * 501}, "description"),
])
def test_bad_input_is_a_400_with_the_fields_errors(owner_client, body, field):
    answer = owner_client.post("/api/webhooks/", body, format="json")
    assert answer.status_code == 400 and field in answer.json()
    assert not WebhookSubscription.objects.exists()


@pytest.mark.django_db
def test_a_user_lists_only_their_own_subscriptions(owner_client, token_client, users):
    owner_client.post("/api/webhooks/", HOOK, format="json")
    other = token_client(users["support"])
    other.post("/api/webhooks/", {**HOOK, "url": "http://127.0.0.1:9999/support"}, format="json")
    assert [s["url"] for s in owner_client.get("/api/webhooks/").json()["results"]] == [HOOK["url"]]


@pytest.mark.django_db
def test_a_user_deletes_their_own_subscription(owner_client):
    created = owner_client.post("/api/webhooks/", HOOK, format="json").json()
    assert owner_client.delete(f"/api/webhooks/{created['id']}/").status_code == 204
    assert not WebhookSubscription.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/webhooks/{id}/", "/api/webhooks/{id}/deliveries/"])
def test_another_users_subscription_is_not_found(owner_client, token_client, users, path):
    created = owner_client.post("/api/webhooks/", HOOK, format="json").json()
    other = token_client(users["superuser"])
    method = other.delete if path.endswith("/{id}/") else other.get
    answer = method(path.format(id=created["id"]))
    assert answer.status_code == 404 and answer.json()["detail"]
    assert WebhookSubscription.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("subscription_id", ["999", "abc", "0", "99999999999999999999999"])
def test_an_id_no_subscription_has_is_a_json_404(owner_client, subscription_id):
    assert owner_client.get(f"/api/webhooks/{subscription_id}/deliveries/").status_code == 404
    assert owner_client.delete(f"/api/webhooks/{subscription_id}/").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("method, path", [("get", "/api/webhooks/"), ("post", "/api/webhooks/"),
                                          ("delete", "/api/webhooks/1/"), ("get", "/api/webhooks/1/deliveries/")])
def test_every_endpoint_needs_a_signed_in_user(method, path):
    answer = getattr(APIClient(), method)(path, HOOK, format="json")
    assert answer.status_code == 401 and answer["WWW-Authenticate"] == "Token"


@pytest.mark.django_db(transaction=True)
def test_the_deliveries_show_each_attempt(users, token_client, receiver, drain_runs, deliver):
    client = token_client(users["owner"])
    failing = receiver(500)
    created = client.post("/api/webhooks/", {"url": failing.url, "events": ["run.suspended"]}, format="json").json()
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    deliver()
    page = client.get(f"/api/webhooks/{created['id']}/deliveries/").json()
    (delivery,) = page["results"]
    assert (delivery["type"], delivery["run_id"], delivery["status"], delivery["attempt_count"]) == (
        "run.suspended", "r1", "pending", 1)
    assert delivery["webhook_id"] == failing.deliveries[0].webhook_id
    (attempt,) = delivery["attempts"]
    assert (attempt["number"], attempt["status_code"], attempt["error"]) == (1, 500, "The receiver answered 500.")
    assert attempt["next_attempt_at"] == delivery["next_attempt_at"] and attempt["duration_ms"] >= 0
    assert created["secret"] not in str(page)


@pytest.mark.django_db
def test_the_document_describes_every_webhooks_endpoint_with_its_statuses(owner_client):
    paths = owner_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    statuses = {(method, path): set(operation["responses"]) for path, item in paths.items()
                if path.startswith("/api/webhooks/") for method, operation in item.items()}
    assert statuses == {
        ("get", "/api/webhooks/"): {"200", "401", "404"},
        ("post", "/api/webhooks/"): {"201", "400", "401", "403", "413", "415"},
        ("delete", "/api/webhooks/{id}/"): {"204", "401", "403", "404"},
        ("get", "/api/webhooks/{id}/deliveries/"): {"200", "401", "404"},
    }


@pytest.mark.django_db(transaction=True)
def test_no_page_of_the_admin_and_no_log_line_shows_a_secret(users, subscribe, drain_runs, deliver, caplog):
    caplog.set_level(logging.DEBUG)
    subscription = subscribe(users["owner"])
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    deliver()
    client = Client()
    client.force_login(users["superuser"])
    from notifications.models import DeliveryAttempt, OutboxEvent, OutboxMessage

    pages = ["/admin/notifications/webhooksubscription/",
             f"/admin/notifications/webhooksubscription/{subscription.pk}/change/",
             "/admin/notifications/outboxevent/",
             f"/admin/notifications/outboxevent/{OutboxEvent.objects.first().pk}/change/",
             "/admin/notifications/outboxmessage/",
             f"/admin/notifications/outboxmessage/{OutboxMessage.objects.first().pk}/change/",
             "/admin/notifications/deliveryattempt/",
             f"/admin/notifications/deliveryattempt/{DeliveryAttempt.objects.first().pk}/change/"]
    for page in pages:
        answer = client.get(page)
        assert answer.status_code == 200, page
        assert subscription.secret not in answer.content.decode(), page
    assert subscription.secret not in caplog.text


@pytest.mark.django_db
def test_the_admin_adds_and_changes_nothing(users, subscribe):
    subscription = subscribe(users["owner"])
    client = Client()
    client.force_login(users["superuser"])
    assert client.get("/admin/notifications/webhooksubscription/add/").status_code == 403
    answer = client.post(f"/admin/notifications/webhooksubscription/{subscription.pk}/change/",
                         {"url": "http://127.0.0.1:1/changed", "events": "[]"})
    assert answer.status_code == 403
    assert WebhookSubscription.objects.get().url == subscription.url
