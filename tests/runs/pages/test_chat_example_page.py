"""The AI SDK example page (/examples/ai-sdk-chat/) with Django's client: who may open it, what the server renders for
the page's script (the agents, the CSRF token, its module), and its CSP. The chat itself runs in headless Chromium
(tests/browser/test_ai_sdk_chat_page.py)."""

from __future__ import annotations

import re

import pytest

from tests.csp import csp_problems

pytestmark = pytest.mark.django_db

PATH = "/examples/ai-sdk-chat/"


def test_a_visitor_without_a_login_is_sent_to_sign_in(client):
    response = client.get(PATH)
    assert (response.status_code, response.url) == (302, f"/accounts/login/?next={PATH}")


def test_a_signed_in_user_gets_the_page_with_the_agents_and_the_csrf_token_under_the_csp(browser_for):
    response = browser_for("plain").get(PATH)
    html = response.content.decode()
    assert response.status_code == 200
    assert csp_problems(response) == []
    assert '<option value="assistant" selected>' in html
    token = re.search(r'<meta name="csrf-token" content="([^"]+)">', html).group(1)
    assert len(token) >= 32
    assert '<script type="module" src="/static/deuz/examples/ai-sdk-chat.js"></script>' in html


def test_the_page_answers_only_get(browser_for):
    assert browser_for("plain").post(PATH).status_code == 405
