"""Who may do what through the REST API: owners, other users, support, reviewers and superusers (issue 11)."""

from __future__ import annotations

import pytest

from approvals.roles import SUPPORT_GROUP
from runs.models import Run
from tests.factories import make_queued_run, make_suspended_run, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def other(db):
    return make_user("otto")


@pytest.fixture
def support(db):
    return make_user("sue", SUPPORT_GROUP)


def listed(client, **filters) -> list[str]:
    response = client.get("/api/runs/", filters)
    assert response.status_code == 200, response.content
    return [run["run_id"] for run in response.json()["results"]]


# --------------------------------------------------------------------------- reading


def test_a_user_lists_only_their_own_runs(token_client, owner, other):
    make_queued_run("mine", user=owner)
    make_queued_run("theirs", user=other)
    assert listed(token_client(owner)) == ["mine"]


def test_support_lists_every_run(token_client, owner, other, support):
    make_queued_run("a", user=owner)
    make_queued_run("b", user=other)
    assert listed(token_client(support)) == ["b", "a"]


def test_created_by_narrows_the_list_to_one_creator(token_client, owner, other, support):
    make_queued_run("a", user=owner)
    make_queued_run("b", user=other)
    assert listed(token_client(support), created_by="otto") == ["b"]


def test_created_by_never_shows_a_plain_user_anothers_runs(token_client, owner, other):
    make_queued_run("theirs", user=other)
    assert listed(token_client(owner), created_by="otto") == []


def test_another_users_run_is_a_404_like_an_unknown_one(token_client, owner, other):
    make_queued_run("theirs", user=other)
    client = token_client(owner)
    response = client.get("/api/runs/theirs/")
    unknown = client.get("/api/runs/nowhere/")
    assert (response.status_code, unknown.status_code) == (404, 404)
    assert response.json()["detail"] == unknown.json()["detail"].replace("nowhere", "theirs")


def test_another_users_checkpoints_are_a_404(token_client, owner, other):
    make_queued_run("theirs", user=other)
    assert token_client(owner).get("/api/runs/theirs/checkpoints/").status_code == 404


def test_support_reads_another_users_run_and_its_creator(token_client, owner, support):
    make_queued_run("a", user=owner)
    body = token_client(support).get("/api/runs/a/").json()
    assert (body["run_id"], body["created_by"]) == ("a", "olga")


def test_support_reads_another_users_checkpoints(token_client, owner, support):
    make_queued_run("a", user=owner)
    assert token_client(support).get("/api/runs/a/checkpoints/").status_code == 200


# --------------------------------------------------------------------------- cancelling


def test_the_owner_cancels_their_run(token_client, owner):
    make_queued_run("mine", user=owner)
    assert token_client(owner).post("/api/runs/mine/cancel/").status_code == 200
    assert Run.objects.get(run_id="mine").status == Run.Status.CANCELLED


def test_cancelling_a_run_one_may_not_read_is_a_404_and_changes_nothing(token_client, owner, other):
    make_queued_run("theirs", user=other)
    assert token_client(owner).post("/api/runs/theirs/cancel/").status_code == 404
    assert Run.objects.get(run_id="theirs").status == Run.Status.QUEUED


def test_support_may_read_but_not_cancel_anothers_run_so_it_is_a_403(token_client, owner, support):
    make_queued_run("a", user=owner)
    response = token_client(support).post("/api/runs/a/cancel/")
    assert response.status_code == 403
    assert "runs.cancel_every_run" in response.json()["detail"]
    assert Run.objects.get(run_id="a").status == Run.Status.QUEUED


def test_a_superuser_cancels_anyones_run(token_client, owner):
    make_queued_run("a", user=owner)
    root = make_user("root", is_superuser=True)
    assert token_client(root).post("/api/runs/a/cancel/").status_code == 200


# --------------------------------------------------------------------------- approval tokens


@pytest.fixture
def suspended(owner, drain_runs):
    """A reimbursement run of the owner's, waiting for a reviewer."""
    return make_suspended_run(drain_runs, "r-1", user=owner).run.run_id


@pytest.mark.django_db(transaction=True)
def test_a_reviewer_sees_the_pending_approvals_token(token_client, reviewer, suspended):
    (request,) = token_client(reviewer).get(f"/api/runs/{suspended}/").json()["pending_approvals"]
    assert request["token"].startswith("v1.")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("who", ["owner", "support"])
def test_who_may_not_decide_sees_pending_approvals_without_tokens(token_client, request, who, suspended):
    (pending,) = token_client(request.getfixturevalue(who)).get(f"/api/runs/{suspended}/").json()["pending_approvals"]
    assert pending["tool_name"] == "pay_expense"
    assert "token" not in pending


@pytest.mark.django_db(transaction=True)
def test_checkpoints_carry_approval_tokens_only_for_who_may_decide(token_client, support, reviewer, suspended):
    def last_pending(user):
        checkpoints = token_client(user).get(f"/api/runs/{suspended}/checkpoints/").json()["results"]
        (pending,) = checkpoints[-1]["pending_approvals"]
        return pending

    assert "token" not in last_pending(support)
    assert last_pending(reviewer)["token"].startswith("v1.")


@pytest.mark.django_db(transaction=True)
def test_support_cannot_decide_even_with_a_real_token(token_client, support, reviewer, suspended):
    (pending,) = token_client(reviewer).get(f"/api/runs/{suspended}/").json()["pending_approvals"]
    response = token_client(support).post(
        f"/api/runs/{suspended}/approvals/{pending['approval_id']}/",
        {"approved": True, "token": pending["token"]},
        format="json",
    )
    assert response.status_code == 403
    assert Run.objects.get(run_id=suspended).status == Run.Status.SUSPENDED
