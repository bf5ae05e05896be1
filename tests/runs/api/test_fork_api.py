"""POST /api/runs/{run_id}/checkpoints/{step_index}/fork/: support and reviewers start a new run from a checkpoint;
whoever may read the run but not fork it gets 403, whoever may not read it 404."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from runs.models import Run
from tests.factories import make_paid_run, token_of

pytestmark = pytest.mark.django_db(transaction=True)  # the sandbox pays from the tools' own threads

FORK = "/api/runs/r-paid/checkpoints/{step}/fork/"


@pytest.fixture
def origin(users, drain_runs) -> Run:
    return make_paid_run(drain_runs, user=users["owner"])


def client_of(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_of(user)}")
    return client


@pytest.mark.parametrize("role", ["support", "reviewer", "superuser"])
def test_support_and_reviewers_fork_a_checkpoint_into_a_new_run_linked_to_its_origin(users, origin, role):
    response = client_of(users[role]).post(FORK.format(step=1), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["run_id"], body["agent"], body["status"], body["created_by"]) == (
        "r-paid-fork-1", "reimbursement", "queued", users[role].username)
    assert body["forked_from"] == {"run_id": "r-paid", "step_index": 1}
    assert Run.objects.get(run_id="r-paid-fork-1").forked_from == origin


def test_the_runs_creator_without_a_role_may_read_it_but_not_fork_it(users, origin):
    response = client_of(users["owner"]).post(FORK.format(step=1), format="json")
    assert response.status_code == 403
    assert "support or reviewers" in response.json()["detail"]
    assert not Run.objects.filter(forked_from=origin).exists()


@pytest.mark.parametrize("role", ["plain", "staff"])
def test_a_user_who_may_not_read_the_run_is_told_it_does_not_exist(users, origin, role):
    response = client_of(users[role]).post(FORK.format(step=1), format="json")
    assert response.status_code == 404
    assert response.json()["detail"] == "No run 'r-paid'."


def test_an_anonymous_fork_is_refused_with_401(origin):
    assert APIClient().post(FORK.format(step=1), format="json").status_code == 401


@pytest.mark.parametrize("step", ["9", "abc", "1234567890", "-1"])
def test_a_step_the_run_has_no_checkpoint_of_is_a_json_404(users, origin, step):
    response = client_of(users["reviewer"]).post(FORK.format(step=step), format="json")
    assert response.status_code == 404
    assert "no checkpoint of step" in response.json()["detail"]


def test_the_new_runs_id_may_be_given_and_a_taken_one_is_a_409(users, origin):
    client = client_of(users["support"])
    assert client.post(FORK.format(step=0), {"run_id": "again-1"}, format="json").json()["run_id"] == "again-1"
    taken = client.post(FORK.format(step=0), {"run_id": "again-1"}, format="json")
    assert taken.status_code == 409 and "run_id" in taken.json()


@pytest.mark.parametrize("body", [{"run_id": "bad id"}, {"run_id": 5}, {"agent": "coder"}, {"run_id": "x" * 201}])
def test_a_bad_body_is_a_400_with_field_errors_and_forks_nothing(users, origin, body):
    response = client_of(users["reviewer"]).post(FORK.format(step=0), body, format="json")
    assert response.status_code == 400
    assert set(response.json()) - {"detail"}
    assert not Run.objects.filter(forked_from=origin).exists()


def test_a_run_that_is_not_a_fork_says_so_in_its_json(users, origin):
    body = client_of(users["owner"]).get("/api/runs/r-paid/").json()
    assert body["forked_from"] is None


def test_the_run_list_shows_where_each_fork_came_from(users, origin):
    client = client_of(users["reviewer"])
    client.post(FORK.format(step=0), format="json")
    listed = {run["run_id"]: run["forked_from"] for run in client.get("/api/runs/").json()["results"]}
    assert listed == {"r-paid": None, "r-paid-fork-1": {"run_id": "r-paid", "step_index": 0}}


def test_a_session_fork_needs_the_csrf_token(users, origin):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(users["reviewer"])
    assert client.post(FORK.format(step=0), format="json").status_code == 403
