"""The AI SDK example page (/examples/ai-sdk-chat/) in headless Chromium against a real `manage.py serve`: the `ai`
package's own Chat and DefaultChatTransport (static/vendor/ai/ai.js) chat with the `assistant` agent, sending only the
last message; F5 mid-turn reloads the chat from /api/chat/ID/messages and rejoins the turn without doubling it; the
user approves send_message with addToolApprovalResponse (the POST carries approval-responded) and reads the final
answer; no CSP violation and no serious axe-core finding."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from selenium.webdriver.common.by import By

from approvals.models import ApprovalRequest
from demo.models import SandboxMessage
from runs.models import Run
from tests.browser.test_csp import RECORD_VIOLATIONS
from tests.browser.test_people import PASSWORD, axe_violations, shot, sign_in, text_of, texts_of, wait
from tests.factories import make_user

PAGE = "/examples/ai-sdk-chat/"
# Before any page script: every POST body the transport sends to /api/chat, kept per page load.
RECORD_POSTS = """
window.__chatPosts = [];
const pageFetch = window.fetch;
window.fetch = (input, init) => {
  if (init?.method === "POST" && String(input).startsWith("/api/chat")) window.__chatPosts.push(JSON.parse(init.body));
  return pageFetch(input, init);
};
"""


@pytest.fixture
def server(serve, browser, server_passwords, db) -> str:
    make_user("olga", password=PASSWORD)
    browser.set_window_size(1280, 900)
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_VIOLATIONS + RECORD_POSTS})
    return serve("--workers", "1")


def status(browser) -> str:
    return text_of(browser, "#ai-status")


def posts(browser) -> list[dict]:
    return browser.execute_script("return window.__chatPosts")


def approvable(browser) -> bool:
    return bool(browser.find_elements(By.CSS_SELECTOR, ".tool.approval-requested button.approve"))


@pytest.mark.browser
def test_a_user_chats_with_the_assistant_reloads_mid_turn_approves_its_message_and_reads_the_answer(server, browser):
    sign_in(browser, server, "olga", PAGE)
    wait(browser, lambda driver: status(driver) == "Ready.", 30)  # the bundle loaded and the chat is ready
    found = {"empty": axe_violations(browser)}
    browser.find_element(By.ID, "ai-input").send_keys("Tell Ada the build is green")
    browser.find_element(By.ID, "ai-send").click()
    wait(browser, lambda driver: driver.find_elements(By.CSS_SELECTOR, ".tool.output-available"), 30)
    assert status(browser) == "The agent is answering…"
    [first] = posts(browser)  # one POST: the new chat's first message, alone
    chat_id = parse_qs(urlparse(browser.current_url).query)["chat"][0]
    assert first["id"] == chat_id and first["agent"] == "assistant" and first["trigger"] == "submit-message"
    assert [(message["role"], message["parts"]) for message in first["messages"]] == [
        ("user", [{"type": "text", "text": "Tell Ada the build is green"}])]

    browser.refresh()  # F5 mid-turn: the messages so far from /api/chat/ID/messages, then the turn rejoined
    wait(browser, lambda driver: status(driver) == "Waiting for a verdict.", 30)  # the turn's stream ended
    assert approvable(browser)
    assert texts_of(browser, "#ai-messages > li .role") == ["You", "assistant"]
    said = texts_of(browser, "#ai-messages p.assistant-text")  # each once: the replay replaced the partial answer
    assert said[0] == "Let me look Ada up." and said[1].startswith("Ada Lovelace is ada@example.test.") and len(said) == 2
    assert len(browser.find_elements(By.CSS_SELECTOR, ".tool")) == 2  # find_contact done, send_message asking
    assert browser.find_element(By.ID, "ai-input").get_attribute("disabled") is not None
    found["approval"] = axe_violations(browser)
    shot(browser, "ai-sdk-chat-approval")

    browser.find_element(By.CSS_SELECTOR, ".tool.approval-requested button.approve").click()
    wait(browser, lambda driver: status(driver) == "Ready." and not approvable(driver), 30)
    assert texts_of(browser, "#ai-messages p.assistant-text")[-1].startswith("Sent to Ada Lovelace (msg-")
    [verdict] = posts(browser)  # addToolApprovalResponse: the assistant message alone, its part approval-responded
    [message] = verdict["messages"]
    responded = [part for part in message["parts"] if part.get("state") == "approval-responded"]
    assert message["role"] == "assistant" and [part["approval"]["approved"] for part in responded] == [True]
    found["answered"] = axe_violations(browser)
    shot(browser, "ai-sdk-chat-answered")

    run = Run.objects.get(thread__thread_id=chat_id)
    request = ApprovalRequest.objects.get(run=run)
    assert (run.status, request.status, request.decided_by.username) == ("completed", "used", "olga")  # approved, then used once
    assert SandboxMessage.objects.count() == 1
    assert {name: violations for name, violations in found.items() if violations} == {}
    assert browser.execute_script("return window.__cspViolations") == []
