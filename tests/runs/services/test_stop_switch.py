"""The stop switch: global and per agent, from the CLI and the admin. While on, a run reaching a new effect
suspends with "effects are stopped" and nothing is attempted; released, it continues and pays once."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError
from django.urls import reverse

from approvals.models import ApprovalRequest
from demo.models import SandboxCommand, SandboxPayment
from runs.models import EffectStopSwitch, Run
from runs.services.stop_switch import effects_release, effects_stop
from runs.stores.ledger import effects_stop_reason
from tests.commands import runs_cli
from tests.factories import make_queued_run, make_user, verdict

pytestmark = pytest.mark.django_db(transaction=True)


def test_while_effects_are_stopped_a_run_reaching_one_suspends_and_pays_nothing(approved_run, drain_runs):
    run = approved_run()
    effects_stop(reason="incident 42")
    drain_runs()
    run.refresh_from_db()
    assert (run.status, run.error, SandboxPayment.objects.count()) == ("suspended", "effects are stopped", 0)


def test_released_the_held_run_continues_and_pays_once(approved_run, drain_runs):
    run = approved_run()
    effects_stop()
    drain_runs()
    assert effects_release() == 1
    drain_runs()
    run.refresh_from_db()
    assert (run.status, SandboxPayment.objects.count(), run.effects.get().status) == ("completed", 1, "verified")


def test_reads_go_on_while_effects_are_stopped(drain_runs):
    effects_stop()
    run = make_queued_run("r-read")
    drain_runs()
    run.refresh_from_db()
    # The lookup ran (a read) and the run reached its approval request, which waits for a person as usual.
    assert (run.status, run.approval_requests.count()) == ("suspended", 1)


def test_a_switch_for_one_agent_holds_only_that_agents_effects(drain_runs):
    paying, coding = make_queued_run("r-pay"), make_queued_run("r-code", agent="coder")
    drain_runs()
    for request in ApprovalRequest.objects.filter(status=ApprovalRequest.Status.PENDING):  # the payment, the shell
        verdict(request)
    effects_stop(agent="reimbursement")
    drain_runs()
    paying.refresh_from_db()
    coding.refresh_from_db()
    assert (paying.status, coding.status, SandboxCommand.objects.count()) == ("suspended", "completed", 1)


def test_releasing_one_agent_keeps_runs_held_by_the_global_switch(approved_run, drain_runs):
    approved_run()
    effects_stop()
    effects_stop(agent="reimbursement")
    drain_runs()
    assert (effects_release(agent="reimbursement"), effects_stop_reason(agent="reimbursement")) == (
        0, "effects are stopped")


def test_the_cli_stops_and_releases_effects(approved_run, drain_runs):
    run = approved_run()
    assert "Effects are stopped for every agent" in runs_cli("stop-effects", "--reason", "incident")
    drain_runs()
    output = runs_cli("stop-effects", "--release")
    drain_runs()
    run.refresh_from_db()
    assert ("1 held run(s) queued" in output, run.status) == (True, "completed")


def test_the_cli_stops_one_agent():
    user = make_user("ops")
    runs_cli("stop-effects", "--agent", "coder", "--as", "ops")
    switch = EffectStopSwitch.objects.get()
    assert (switch.agent, switch.is_on, switch.changed_by) == ("coder", True, user)


def test_the_cli_refuses_an_unknown_agent():
    with pytest.raises(CommandError, match="No agent named"):
        runs_cli("stop-effects", "--agent", "nobody")
    assert not EffectStopSwitch.objects.exists()


def test_the_run_page_state_says_effects_are_stopped(approved_run, drain_runs):
    from runs.presenters.state import run_people_state

    run = approved_run()
    effects_stop()
    drain_runs()
    state = run_people_state(Run.objects.get(pk=run.pk))
    assert (state.key, state.why.startswith("effects are stopped")) == ("effects_stopped", True)


def test_the_admin_adds_a_switch_and_releases_it(admin_client, approved_run, drain_runs):
    run = approved_run()
    admin_client.post(reverse("admin:runs_effectstopswitch_add"), {"agent": "", "reason": "incident"})
    drain_runs()
    switch = EffectStopSwitch.objects.get()
    assert (switch.is_on, Run.objects.get(pk=run.pk).status) == (True, "suspended")
    admin_client.post(reverse("admin:runs_effectstopswitch_changelist"),
                      {"action": "release_selected", "_selected_action": [switch.pk]})
    drain_runs()
    assert Run.objects.get(pk=run.pk).status == "completed"


def test_the_admin_refuses_a_switch_for_an_unknown_agent(admin_client):
    response = admin_client.post(reverse("admin:runs_effectstopswitch_add"), {"agent": "nobody", "reason": ""})
    assert (response.status_code, EffectStopSwitch.objects.count()) == (200, 0)


def test_the_api_stops_one_agent_and_releases_it(admin_client, approved_run, drain_runs):
    run = approved_run()
    stopped = admin_client.post("/api/effects/stop/", {"agent": "reimbursement", "reason": "incident"},
                                content_type="application/json")
    drain_runs()
    assert (stopped.status_code, stopped.json()["effects_stopped"][0]["agent"]) == (200, "reimbursement")
    released = admin_client.post("/api/effects/stop/", {"agent": "reimbursement", "release": True},
                                 content_type="application/json")
    drain_runs()
    assert (released.json()["queued"], Run.objects.get(pk=run.pk).status) == (1, "completed")


def test_the_api_refuses_a_user_who_may_not_flip_the_switch(outsider_client):
    response = outsider_client.post("/api/effects/stop/", {}, format="json")
    assert (response.status_code, EffectStopSwitch.objects.count()) == (403, 0)


def test_the_api_answers_an_unknown_agent_with_a_400(admin_client):
    response = admin_client.post("/api/effects/stop/", {"agent": "nobody"}, content_type="application/json")
    assert response.status_code == 400
