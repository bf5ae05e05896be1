"""Who may follow a run, on both transports (issue 11): its creator, support and reviewers; anyone else is
told the run does not exist. Approval tokens reach only those who may decide. Sessions and DRF tokens both
authenticate, by the REST API's own rules."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.factories import make_suspended_run, make_user, token_of
from tests.streams import follow, token_header, ws_follow

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def suspended(drain_runs, owner):
    """The owner's run, waiting for the approval of its payment."""
    return make_suspended_run(drain_runs, "access-1", user=owner)


def approvals_in(events: list[dict]) -> list[dict]:
    return [e["data"]["approval"] for e in events if isinstance(e["data"], dict) and e["data"]["type"] == "tool-approval-request"]


def ws_approvals_in(frames: list[dict]) -> list[dict]:
    return [f["part"]["approval"] for f in frames if f.get("part", {}).get("type") == "tool-approval-request"]


def session_get(user, path: str, **headers):
    client = Client()
    client.force_login(user)
    return client.get(path, headers=headers)


# ------------------------------------------------------------------ who may follow


def test_the_owner_follows_their_run(suspended, owner):
    assert follow(owner, "access-1")[-1]["data"] == "[DONE]"


def test_a_stranger_is_told_the_run_does_not_exist(suspended):
    stranger = session_get(make_user("sam"), "/api/runs/access-1/events/")
    unknown = session_get(make_user("una"), "/api/runs/no-such-run/events/")
    assert (stranger.status_code, stranger.json()) == (404, {"detail": "No run 'access-1'."})
    assert unknown.status_code == 404 and set(stranger.json()) == set(unknown.json())


def test_support_follows_every_run(suspended):
    assert follow(make_user("sue", "support"), "access-1")[-1]["data"] == "[DONE]"


def test_a_reviewer_follows_every_run(suspended):
    assert follow(make_user("rita", "reviewers"), "access-1")[-1]["data"] == "[DONE]"


def test_a_stranger_s_websocket_is_closed_as_for_an_unknown_run(suspended):
    assert ws_follow("/ws/runs/access-1/", headers=[token_header(make_user("sam"))]) == ([], 4404)


def test_support_s_websocket_follows_every_run(suspended):
    received, code = ws_follow("/ws/runs/access-1/", headers=[token_header(make_user("sue", "support"))])
    assert received[-1] == {"done": True} and code == 1000


# ------------------------------------------------------------------ approval tokens


def test_the_owner_gets_the_approval_request_without_its_token(suspended, owner):
    (approval,) = approvals_in(follow(owner, "access-1"))
    assert approval["approval_id"] == suspended.approval_id and "token" not in approval


def test_support_gets_the_approval_request_without_its_token(suspended):
    (approval,) = approvals_in(follow(make_user("sue", "support"), "access-1"))
    assert approval["tool_name"] == "pay_expense" and "token" not in approval


def test_a_reviewer_gets_the_approval_token(suspended):
    (approval,) = approvals_in(follow(make_user("rita", "reviewers"), "access-1"))
    assert approval["token"] == suspended.token


def test_a_websocket_strips_the_token_for_support(suspended):
    received, _ = ws_follow("/ws/runs/access-1/", headers=[token_header(make_user("sue", "support"))])
    (approval,) = ws_approvals_in(received)
    assert approval["tool_name"] == "pay_expense" and "token" not in approval


def test_a_websocket_carries_the_token_to_a_reviewer(suspended):
    received, _ = ws_follow("/ws/runs/access-1/", headers=[token_header(make_user("rita", "reviewers"))])
    assert [approval["token"] for approval in ws_approvals_in(received)] == [suspended.token]


# ------------------------------------------------------------------ authentication


def test_a_drf_token_authenticates_the_event_stream(suspended, owner):
    response = Client().get("/api/runs/access-1/events/", headers={"Authorization": f"Token {token_of(owner)}"})
    response.close()  # gives the stream back unread
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"


def test_a_token_that_does_not_verify_is_a_401_by_drf_s_rules(suspended):
    response = Client().get("/api/runs/access-1/events/", headers={"Authorization": "Token not-a-key"})
    assert (response.status_code, response.json(), response["WWW-Authenticate"]) == (401, {"detail": "Invalid token."}, "Token")


def test_an_inactive_user_s_token_is_a_401(suspended):
    sam = make_user("sam")
    header = f"Token {token_of(sam)}"
    sam.is_active = False
    sam.save()
    response = Client().get("/api/runs/access-1/events/", headers={"Authorization": header})
    assert (response.status_code, response.json()) == (401, {"detail": "User inactive or deleted."})


def test_a_session_authenticates_the_event_stream(suspended, owner):
    response = session_get(owner, "/api/runs/access-1/events/")
    response.close()
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"


def test_a_token_for_another_user_takes_precedence_over_the_session(suspended, owner):
    # As on the REST API: the token is DRF's first authentication class.
    response = session_get(owner, "/api/runs/access-1/events/", Authorization=f"Token {token_of(make_user('sam'))}")
    assert response.status_code == 404


def test_a_websocket_token_for_another_user_takes_precedence_over_the_session(suspended, owner):
    client = Client()
    client.force_login(owner)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    assert ws_follow("/ws/runs/access-1/", headers=[cookie, token_header(make_user("sam"))]) == ([], 4404)


# Over HTTP a NUL in a credential is refused at the edge (400, tests/test_hostile_input.py), before any lookup.
def test_a_token_with_a_nul_is_a_400_not_a_database_error(suspended):
    response = Client().get("/api/runs/access-1/events/", headers={"Authorization": "Token a\x00b"})
    assert response.status_code == 400


def test_a_session_cookie_with_a_nul_is_a_400_not_a_database_error(suspended):
    client = Client()
    client.cookies["sessionid"] = "abcdefghij\x00k"
    assert client.get("/api/runs/access-1/events/").status_code == 400


def test_a_websocket_token_with_a_nul_is_closed_with_4401(suspended):
    assert ws_follow("/ws/runs/access-1/", headers=[(b"authorization", b"Token a\x00b")]) == ([], 4401)


def test_a_websocket_session_cookie_with_a_nul_is_closed_with_4401(suspended):
    assert ws_follow("/ws/runs/access-1/", headers=[(b"cookie", b"sessionid=abcdefghij\x00k")]) == ([], 4401)
