"""/account/: a signed-in user turns the emails about approval requests off and on again; anonymous visitors are
sent to sign in."""

from __future__ import annotations

import pytest
from django.test import Client

from notifications.selectors import email_preference_get
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_anonymous_visitors_are_sent_to_sign_in():
    response = Client().get("/account/")
    assert (response.status_code, response.url) == (302, "/accounts/login/?next=/account/")


def test_the_emails_are_on_until_turned_off():
    rita = make_user("rita", "reviewers", email="rita@example.test")
    page = signed_in(rita).get("/account/").content.decode()
    assert 'name="review_requests"' in page and "checked" in page
    assert email_preference_get(user=rita).review_requests is True


def test_a_user_turns_the_emails_off_and_on_again():
    rita = make_user("rita", "reviewers", email="rita@example.test")
    browser = signed_in(rita)
    response = browser.post("/account/", {}, follow=True)  # an unticked box is not sent
    assert "Emails about approval requests are off." in response.content.decode()
    assert email_preference_get(user=rita).review_requests is False
    assert "checked" not in browser.get("/account/").content.decode().split('name="review_requests"')[1][:80]
    browser.post("/account/", {"review_requests": "on"})
    assert email_preference_get(user=rita).review_requests is True


def test_one_users_choice_leaves_anothers_alone():
    rita = make_user("rita", "reviewers", email="rita@example.test")
    ravi = make_user("ravi", "reviewers", email="ravi@example.test")
    signed_in(rita).post("/account/", {})
    assert email_preference_get(user=ravi).review_requests is True


def test_someone_who_may_not_decide_is_told_they_get_none():
    page = signed_in(make_user("pat", email="pat@example.test")).get("/account/").content.decode()
    assert "you may not decide any now" in page
