"""The stream's cursor: a malformed ``?cursor=`` is refused even when a ``Last-Event-ID`` header is sent beside it
(the header wins when both are seqs; a bad query value is never silently ignored)."""

from __future__ import annotations

import pytest

from tests.factories import make_run, make_user

pytestmark = pytest.mark.django_db(transaction=True)

REFUSED = (400, {"detail": "The cursor must be a whole number of at least -1."})


def test_a_malformed_query_cursor_beside_a_last_event_id_is_a_400(client):
    owner = make_user("follower")
    make_run("x", created_by=owner)
    client.force_login(owner)
    response = client.get("/api/runs/x/events/?cursor=-65253", headers={"Last-Event-ID": "-1"})
    assert (response.status_code, response.json()) == REFUSED


def test_a_malformed_query_cursor_beside_a_last_event_id_still_asks_for_credentials_first(client):
    make_run("x")
    response = client.get("/api/runs/x/events/?cursor=-65253", headers={"Last-Event-ID": "-1"})
    assert response.status_code == 401
