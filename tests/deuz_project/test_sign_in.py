"""The site's own sign-in: every role signs in at /accounts/login/, lands where its work is, and signs out."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def sign_in(client: Client, username: str, next_url: str = ""):
    return client.post("/accounts/login/", {"username": username, "password": "not-used", "next": next_url})


@pytest.mark.parametrize(
    ("role", "lands_on"),
    [("plain", "/runs/"), ("owner", "/runs/"), ("support", "/runs/"), ("reviewer", "/console/"),
     ("staff", "/admin/"), ("superuser", "/admin/")],
)
def test_each_role_signs_in_at_the_sites_page_and_lands_where_its_work_is(client, users, role, lands_on):
    response = sign_in(client, users[role].username)
    assert (response.status_code, response.url) == (302, lands_on)
    assert client.get(lands_on).status_code == 200


def test_sign_in_goes_back_to_the_page_asked_for(client, users):
    response = sign_in(client, "rita", next_url="/runs/")
    assert response.url == "/runs/"


def test_sign_in_refuses_another_sites_next(client, users):
    response = sign_in(client, "rita", next_url="https://evil.example/")
    assert response.url == "/console/"


def test_a_wrong_password_is_said_and_signs_no_one_in(client, users):
    response = client.post("/accounts/login/", {"username": "rita", "password": "wrong"})
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()
    assert client.get("/console/").status_code == 302


def test_the_sign_in_page_names_the_roles_and_labels_its_fields(client):
    html = client.get("/accounts/login/").content.decode()
    assert '<label for="id_username">Username</label>' in html and '<label for="id_password">Password</label>' in html
    assert "Reviewers" in html and "Support staff" in html and "API users" in html


def test_the_header_links_the_sign_in_page_with_the_way_back(client):
    html = client.get("/").content.decode()
    assert 'href="/accounts/login/?next=/"' in html


def test_signed_in_the_header_names_the_user_and_role_and_offers_to_sign_out(browser_for):
    html = browser_for("reviewer").get("/").content.decode()
    assert "rita <small>(reviewer)</small>" in html
    assert '<form method="post" action="/accounts/logout/" class="sign-out">' in html


@pytest.mark.parametrize(("role", "links"), [
    ("plain", {"/runs/": True, "/console/": False, "/admin/": False}),
    ("support", {"/runs/": True, "/console/": False, "/admin/": True}),
    ("reviewer", {"/runs/": True, "/console/": True, "/admin/": True}),
])
def test_the_header_links_only_what_the_role_may_open(browser_for, role, links):
    header = browser_for(role).get("/").content.decode().split("</header>", 1)[0]
    assert {path: f'href="{path}"' in header for path in links} == links


def test_signing_out_ends_the_session(browser_for):
    client = browser_for("reviewer")
    response = client.post("/accounts/logout/")
    assert response.status_code == 200 and "You are signed out" in response.content.decode()
    assert client.get("/console/").status_code == 302


def test_signing_out_by_get_shows_a_page_with_the_sign_out_button_and_signs_no_one_out(browser_for):
    client = browser_for("reviewer")
    response = client.get("/accounts/logout/")
    html = response.content.decode()
    assert response.status_code == 200 and "You are signed in as rita" in html
    assert html.count('<form method="post" action="/accounts/logout/"') == 2  # the header's and the page's
    assert client.get("/console/").status_code == 200


def test_the_console_refuses_a_signed_in_non_reviewer_with_a_page_saying_why(browser_for):
    response = browser_for("support").get("/console/")
    html = response.content.decode()
    assert response.status_code == 403
    assert "The console is for reviewers" in html and "sue does not have it" in html
    assert "Support staff read runs and their timelines at /runs/" in html
    assert 'href="/accounts/login/?next=/console/"' in html  # sign in as someone else


def test_a_signed_in_user_may_change_their_password(browser_for, users):
    client = browser_for("plain")
    response = client.post("/accounts/password_change/", {
        "old_password": "not-used", "new_password1": "a-much-longer-secret-9", "new_password2": "a-much-longer-secret-9",
    })
    assert response.url == "/accounts/password_change/done/"
    users["plain"].refresh_from_db()
    assert users["plain"].check_password("a-much-longer-secret-9")
