"""The authorization matrix of the pages, the admin and the live pages' socket: every route × every role, with
the answer each must get. The run r1 is the owner's, suspended on its payment's approval.

  anonymous  no session          plain      signed in, no group, not r1's creator
  owner      started r1          support    the support group (staff)
  reviewer   the reviewers group (staff)    staff      staff, no group
  superuser  everything

Answers: a status code; "listed" / "unlisted" for the run list (200, with or without r1); "login" for a redirect
to the site's sign-in (the admin's own for admin paths); for sockets "open" or the close code.
"""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from approvals.models import ApprovalRequest
from runs.admin import token_preview
from runs.models import Checkpoint, JournalEntry, Run
from tests.conftest import ROLES
from tests.runs.api.test_pages_socket import as_user

pytestmark = pytest.mark.django_db(transaction=True)

A, P, O, S, R, T, U = ROLES  # anonymous, plain, owner, support, reviewer, staff, superuser


def row(anonymous, plain, owner, support, reviewer, staff, superuser) -> dict[str, object]:
    return dict(zip(ROLES, [anonymous, plain, owner, support, reviewer, staff, superuser], strict=True))


# (method, path, answers); {approval} and {pk} are r1's request.
PAGES = {
    "home": ("get", "/", row(200, 200, 200, 200, 200, 200, 200)),
    "sign-in": ("get", "/accounts/login/", row(200, 200, 200, 200, 200, 200, 200)),
    "run list": ("get", "/runs/", row("login", "unlisted", "listed", "listed", "listed", "unlisted", "listed")),
    "run list, filtered": ("get", "/runs/?status=suspended&agent=reimbursement",
                           row("login", "unlisted", "listed", "listed", "listed", "unlisted", "listed")),
    "timeline": ("get", "/runs/r1/", row("login", 404, 200, 200, 200, 404, 200)),
    "live transcript": ("get", "/runs/r1/live/", row("login", 404, 200, 200, 200, 404, 200)),
    # The first POST asks to confirm (200); test_only_the_creator_and_superusers_can_cancel_a_run confirms.
    "cancel": ("post", "/runs/r1/cancel/", row("login", 404, 200, 403, 403, 404, 200)),
    "account": ("get", "/account/", row("login", 200, 200, 200, 200, 200, 200)),
    "console, filtered": ("get", "/console/?agent=reimbursement&tool=pay_expense&age=15m&expiring=on",
                          row("login", 403, 403, 403, 200, 403, 200)),
    "console": ("get", "/console/", row("login", 403, 403, 403, 200, 403, 200)),
    "console request": ("get", "/console/r1/{approval}/", row("login", 403, 403, 403, 200, 403, 200)),
    "console verdict": ("post", "/console/r1/{approval}/", row("login", 403, 403, 403, 302, 403, 302)),
    "admin": ("get", "/admin/", row("login", "login", "login", 200, 200, 200, 200)),
    "admin runs": ("get", "/admin/runs/run/", row("login", "login", "login", 200, 200, 403, 200)),
    "admin run": ("get", "/admin/runs/run/{run_pk}/change/", row("login", "login", "login", 200, 200, 403, 200)),
    "admin approvals": ("get", "/admin/approvals/approvalrequest/", row("login", "login", "login", 200, 200, 403, 200)),
    "admin approval": ("get", "/admin/approvals/approvalrequest/{pk}/change/",
                       row("login", "login", "login", 200, 200, 403, 200)),
    "admin journal": ("get", "/admin/runs/journalentry/", row("login", "login", "login", 200, 200, 403, 200)),
    "admin users": ("get", "/admin/auth/user/", row("login", "login", "login", 403, 403, 403, 200)),
    "admin decision": ("post", "/admin/approvals/approvalrequest/",
                       row("login", "login", "login", 403, 302, 403, 302)),
}

SOCKETS = {
    "live runs": ("topic=runs", row(4401, "open", "open", "open", "open", "open", "open")),
    "live run": ("topic=run:r1", row(4401, 4404, "open", "open", "open", 4404, "open")),
    "live console": ("topic=approvals", row(4401, 4403, 4403, 4403, "open", 4403, "open")),
}


def answer(response, path: str) -> object:
    if response.status_code == 302:
        login = "/admin/login/" if path.startswith("/admin/") else "/accounts/login/"
        if response.url.startswith(f"{login}?next="):
            return "login"
    if path.startswith("/runs/?") or path == "/runs/":
        assert response.status_code == 200
        return "listed" if 'href="/runs/r1/"' in response.content.decode() else "unlisted"
    return response.status_code


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("page", PAGES)
def test_each_page_answers_each_role_as_its_rights_say(browser_for, suspended, role, page):
    method, path, answers = PAGES[page]
    path = path.format(approval=suspended.approval_id, pk=suspended.pk, run_pk=suspended.run.pk)
    client = browser_for(role)
    body = {
        "console verdict": {"verdict": "approve", "confirm": "yes"},
        "admin decision": {"action": "approve_selected", "_selected_action": [suspended.pk]},
    }.get(page, {})
    response = getattr(client, method)(path, body)
    assert answer(response, path) == answers[role]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("socket", SOCKETS)
def test_each_live_topic_answers_each_role_as_its_rights_say(users, suspended, role, socket):
    query, answers = SOCKETS[socket]

    async def connect():
        user = AnonymousUser() if role == "anonymous" else users[role]
        communicator = WebsocketCommunicator(as_user(user), f"/ws/live/?{query}")
        connected, code = await communicator.connect()
        if not connected:
            return code
        # A refusal is an accepted socket closed with its code at once (a browser sees the code only then).
        first = None if await communicator.receive_nothing(timeout=0.3) else await communicator.receive_output()
        await communicator.disconnect()
        return first.get("code") if first is not None and first["type"] == "websocket.close" else "open"

    assert async_to_sync(connect)() == answers[role]


@pytest.mark.parametrize("role", [P, S, R, T])
def test_only_the_creator_and_superusers_can_cancel_a_run(browser_for, suspended, role):
    browser_for(role).post("/runs/r1/cancel/", {"confirm": "yes"})
    assert Run.objects.get(run_id="r1").status == "suspended"


@pytest.mark.parametrize("role", [P, O, S, T])
def test_only_deciders_change_a_request(browser_for, suspended, role):
    browser_for(role).post(f"/console/r1/{suspended.approval_id}/", {"verdict": "approve", "confirm": "yes"})
    assert ApprovalRequest.objects.get(pk=suspended.pk).status == "pending"


@pytest.mark.parametrize("role", ROLES)
def test_no_page_shows_an_approval_token(browser_for, suspended, role):
    client = browser_for(role)
    paths = ["/", "/runs/", "/runs/r1/", "/runs/r1/live/", "/console/", f"/console/r1/{suspended.approval_id}/",
             *_token_pages(suspended)]
    shown = [path for path in paths if suspended.token in client.get(path).content.decode()]
    assert shown == []


def _token_pages(suspended: ApprovalRequest) -> list[str]:
    """The admin pages that hold r1's approval token: the request, its suspended checkpoint, its journal part."""
    checkpoint = Checkpoint.objects.get(run=suspended.run, status="suspended")
    part = next(entry for entry in JournalEntry.objects.filter(run=suspended.run, is_sentinel=False)
                if entry.decoded_part["type"] == "tool-approval-request")
    return [f"/admin/approvals/approvalrequest/{suspended.pk}/change/",
            f"/admin/runs/checkpoint/{checkpoint.pk}/change/", f"/admin/runs/journalentry/{part.pk}/change/"]


@pytest.mark.parametrize("role", ROLES)
def test_only_deciders_see_even_a_preview_of_an_approval_token(browser_for, suspended, role):
    client, paths, preview = browser_for(role), _token_pages(suspended), token_preview(suspended.token)
    shown = [path for path in paths if preview in client.get(path).content.decode()]
    assert shown == (paths if role in (R, U) else [])


@pytest.mark.parametrize("role", [S, R, U])
def test_only_deciders_are_offered_the_admin_decision_actions(browser_for, suspended, role):
    content = browser_for(role).get("/admin/approvals/approvalrequest/").content.decode()
    offered = [action for action in ("approve_selected", "deny_selected") if f'value="{action}"' in content]
    assert offered == (["approve_selected", "deny_selected"] if role != S else [])

