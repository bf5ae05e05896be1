"""No secret reaches a page, an API answer, a stream, the admin, the CLI or a log line: every surface a person
or a client reads is scanned, as a superuser sees it (who sees the most), for each secret value the service
holds (Django's key, the approval signing key, the encryption key, a provider's API key)."""

from __future__ import annotations

import logging

import pytest
from asgiref.sync import async_to_sync
from cryptography.fernet import Fernet
from django.test import Client

from approvals.models import ApprovalRequest
from runs.models import Checkpoint, Effect, JournalEntry
from tests.commands import runs_cli
from tests.factories import make_paid_run, make_suspended_run

pytestmark = pytest.mark.django_db(transaction=True)

SECRETS = {
    "SECRET_KEY": "scan-django-secret-key-7c1e2f0a9b8d4e6f-not-for-production",
    "DEUZ_APPROVAL_SECRET": "scan-approval-signing-secret-3b9d0e7a1c",
}
PROVIDER_KEY = "sk-ant-scan-provider-key-5f2a9c1d7e3b8a6f"


@pytest.fixture
def secrets(settings, monkeypatch):
    for name, value in SECRETS.items():
        setattr(settings, name, value)
    key = Fernet.generate_key().decode()
    settings.DEUZ_ENCRYPTION_KEYS = [key]
    monkeypatch.setenv("ANTHROPIC_API_KEY", PROVIDER_KEY)
    return [*SECRETS.values(), key, PROVIDER_KEY]


def surfaces(drain_runs, client: Client) -> dict[str, str]:
    """What ``client`` (a superuser's) reads on every page, answer, stream and command, of a paid and a waiting run."""
    paid = make_paid_run(drain_runs, "scan-paid")
    waiting = make_suspended_run(drain_runs, "scan-wait")
    approval = ApprovalRequest.objects.get(pk=waiting.pk)
    paths = [
        "/", "/runs/", f"/runs/{paid.run_id}/", f"/runs/{paid.run_id}/live/", "/console/",
        f"/console/{waiting.run.run_id}/{approval.approval_id}/",
        "/api/runs/", f"/api/runs/{paid.run_id}/", f"/api/runs/{paid.run_id}/checkpoints/",
        f"/api/runs/{waiting.run.run_id}/", "/api/metrics/", "/api/schema/",
        "/admin/", "/admin/runs/run/", f"/admin/runs/run/{paid.pk}/change/",
        "/admin/runs/checkpoint/", f"/admin/runs/checkpoint/{Checkpoint.objects.first().pk}/change/",
        "/admin/runs/journalentry/", f"/admin/runs/journalentry/{JournalEntry.objects.first().pk}/change/",
        "/admin/approvals/approvalrequest/", f"/admin/approvals/approvalrequest/{approval.pk}/change/",
        "/admin/runs/effect/", f"/admin/runs/effect/{Effect.objects.first().pk}/change/",
    ]
    seen = {path: client.get(path).content.decode() for path in paths}
    stream = client.get(f"/api/runs/{paid.run_id}/events/")

    async def drained() -> bytes:
        return b"".join([chunk async for chunk in stream.streaming_content])

    seen["events"] = async_to_sync(drained)().decode()
    for action in (["list"], ["show", paid.run_id], ["export", paid.run_id], ["show", waiting.run.run_id]):
        seen[f"runs {' '.join(action)}"] = runs_cli(*action)
    return seen


def test_no_secret_value_appears_on_any_surface_or_in_the_logs(secrets, drain_runs, browser_for, caplog):
    caplog.set_level(logging.DEBUG)
    seen = surfaces(drain_runs, browser_for("superuser"))
    seen["logs"] = caplog.text
    leaks = sorted({(where, secret[:12]) for where, text in seen.items() for secret in secrets if secret in text})
    assert len(seen) > 25 and leaks == []


def test_the_scan_finds_a_secret_that_reaches_a_page(secrets, drain_runs, browser_for):
    # The scan itself must be able to fail: a run whose input carries the provider key shows it on its pages.
    make_suspended_run(drain_runs, "scan-leak", messages=[{"role": "user", "content": f"Reimburse {PROVIDER_KEY}"}])
    assert PROVIDER_KEY in browser_for("superuser").get("/api/runs/scan-leak/").content.decode()
