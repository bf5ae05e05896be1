"""The chat page in headless Chromium against a real `manage.py serve`: two turns, the second answered from the
first, with the creator's own approval and a second tab following along; F5 in the middle of the tool loop gives
the same transcript; a server SIGKILLed mid-turn and restarted continues after the recovery note; a reviewers'
agent says it waits for a reviewer and goes on when one decides; axe-core finds no serious violation."""

from __future__ import annotations

import json
import time
import urllib.request
from urllib.parse import urlparse

import pytest
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from approvals.models import ApprovalRequest
from approvals.roles import REVIEWERS_GROUP
from deuz_project.database_url import database_url
from runs.models import Run, Thread
from runs.selectors import run_latest_messages
from runs.stores.streams import DatabaseStreamStateStore
from tests.browser.serving import ServeProcess
from tests.browser.test_people import PASSWORD, axe_violations, shot, sign_in, text_of, texts_of, wait
from tests.environment import PRODUCTION_ENV, clean_env
from tests.factories import make_user, token_of

# Each entry of the latest turn's transcript as people read it: [classes, text].
ENTRIES = """return [...document.querySelectorAll('#transcript > li')]
  .map((li) => [li.className, li.textContent.replace(/\\s+/g, ' ').trim()])"""
STATUS = "#chat-status"


@pytest.fixture
def people(server_passwords, db):
    return {"olga": make_user("olga", password=PASSWORD),
            "rita": make_user("rita", REVIEWERS_GROUP, password=PASSWORD, is_staff=True)}


@pytest.fixture
def server(serve, browser) -> str:
    browser.set_window_size(1280, 900)
    return serve("--workers", "1")


def start_chat(browser, agent: str, text: str) -> str:
    """On /chat/, start a chat with ``agent``; the new thread's id, once its page is open."""
    Select(browser.find_element(By.ID, "id_agent")).select_by_value(agent)
    browser.find_element(By.ID, "id_content").send_keys(text)
    browser.find_element(By.CSS_SELECTOR, "form.chat-start [type=submit]").click()
    wait(browser, lambda driver: urlparse(driver.current_url).path.startswith("/chat/thread_"), 30)
    return urlparse(browser.current_url).path.split("/")[2]


def status(browser) -> str:
    return text_of(browser, STATUS)


def is_disabled(browser) -> bool:
    return browser.execute_script("return document.getElementById('chat-message').disabled")


def send(browser, text: str) -> None:
    """Send ``text`` from the message box; returns once the page the form posted to has replaced this one, so
    what is read next is the new turn's, never the old page's status line."""
    wait(browser, lambda driver: not is_disabled(driver), 30)
    browser.execute_script("window.__sentFrom = true;")  # gone with this page
    browser.find_element(By.ID, "chat-message").send_keys(text)
    browser.find_element(By.CSS_SELECTOR, "form.composer [type=submit]").click()
    wait(browser, _on_the_posted_page, 30)


def _on_the_posted_page(driver) -> bool:
    try:
        return driver.execute_script("return window.__sentFrom !== true && document.readyState === 'complete'")
    except WebDriverException:  # between the two pages (Chromium: "Node ... does not belong to the document")
        return False


def api_post(server: str, path: str, user, body: dict) -> int:
    """The status of a token-authenticated JSON POST to the served API (the server signs with its own key)."""
    request = urllib.request.Request(server + path, data=json.dumps(body).encode(), method="POST", headers={
        "Authorization": f"Token {token_of(user)}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status


def turn_runs(thread_id: str) -> list[Run]:
    return list(Run.objects.filter(thread__thread_id=thread_id).order_by("turn"))


def journal_parts(run_id: str) -> list[dict]:
    return [part for _, part in DatabaseStreamStateStore().read_sync(run_id, after=-1, limit=100_000).parts]


@pytest.mark.browser
def test_two_turns_the_second_answered_from_the_first_with_the_creators_approval_and_a_second_tab(
        people, server, browser):
    sign_in(browser, server, "olga", "/chat/")
    thread_id = start_chat(browser, "assistant", "Tell Ada the build is green")
    first = browser.current_window_handle
    wait(browser, lambda driver: status(driver) == "Waiting for your answer.")
    assert is_disabled(browser)  # the turn waits on its user: no new message meanwhile
    assert "Approval requested: send_message" in text_of(browser, "#transcript")
    shot(browser, "chat-approval-by-the-creator")

    browser.switch_to.new_window("tab")  # a second tab follows along
    second = browser.current_window_handle
    browser.get(f"{server}chat/{thread_id}/")
    wait(browser, lambda driver: status(driver) == "Waiting for your answer.")
    browser.execute_script("window.__notReloaded = true;")

    browser.switch_to.window(first)
    browser.find_element(By.CSS_SELECTOR, ".chat-verdict button.approve").click()
    wait(browser, lambda driver: status(driver) == "The turn is over (completed).")
    assert "Approved by olga" in text_of(browser, "#transcript .entry.verdict")
    assert texts_of(browser, "#transcript p.assistant-text")[-1].startswith("Sent to Ada Lovelace (msg-")
    send(browser, "What is Ada's email address?")
    wait(browser, lambda driver: status(driver) == "The turn is over (completed).")
    answer = texts_of(browser, "#transcript p.assistant-text")
    assert answer == ["Ada Lovelace's address is ada@example.test, as I looked it up earlier in this conversation. "
                      "I sent them \"The build is green\" (" + answer[0].rsplit("(", 1)[1]]
    assert len(browser.find_elements(By.CSS_SELECTOR, "article.turn")) == 2
    shot(browser, "chat-two-turns")

    one, two = turn_runs(thread_id)
    assert [part["type"] for part in journal_parts(two.run_id) if part["type"].startswith("tool")] == []
    assert any(message["role"] == "tool" for message in run_latest_messages(run=two))  # it saw turn 1's results

    browser.switch_to.window(second)  # the other tab showed the verdict, then turn 2, without a reload
    wait(browser, lambda driver: len(driver.find_elements(By.CSS_SELECTOR, "article.turn")) == 2, 30)
    wait(browser, lambda driver: "as I looked it up earlier" in text_of(driver, "#transcript"), 30)
    assert browser.execute_script("return window.__notReloaded === true")


@pytest.mark.browser
def test_f5_in_the_middle_of_the_tool_loop_gives_the_same_transcript(people, server, browser):
    sign_in(browser, server, "olga", "/chat/")
    thread_id = start_chat(browser, "assistant", "Tell Grace the demo is at noon")
    wait(browser, lambda driver: driver.find_elements(By.CSS_SELECTOR, "#transcript > li.tool-call"), 30)
    assert status(browser).startswith("The agent is answering")
    before = browser.execute_script(ENTRIES)
    browser.refresh()  # F5 mid-loop: the stream resumes from the cursor saved with what was on screen
    wait(browser, lambda driver: status(driver) == "Waiting for your answer.")
    after = browser.execute_script(ENTRIES)
    resumed_from = int(browser.find_element(By.ID, "transcript").get_attribute("data-resumed-from"))
    [run] = turn_runs(thread_id)
    assert run.status == "suspended"
    assert 0 <= resumed_from < DatabaseStreamStateStore().read_sync(run.run_id).last_seq
    assert after[:len(before) - 1] == before[:-1]  # what was shown stayed (the last entry may have grown)

    browser.switch_to.new_window("tab")  # a fresh tab: the server's rendering of the same turn
    browser.get(f"{server}chat/{thread_id}/")
    wait(browser, lambda driver: status(driver) == "Waiting for your answer.")
    assert browser.execute_script(ENTRIES) == after
    kinds = [classes for classes, _ in after]
    assert kinds == ["entry text", "entry tool-call", "entry tool-result", "entry text", "entry tool-call",
                     "entry approval"]


def serve_on(port: str, **env: str) -> ServeProcess:
    environment = clean_env(DATABASE_URL=database_url(), DEUZ_DEMO_DELAY_MS="120", DEUZ_LEASE_SECONDS="2",
                            **PRODUCTION_ENV, **env)
    return ServeProcess("--workers", "1", "--port", port, env=environment)


@pytest.mark.browser
def test_a_server_killed_mid_turn_and_restarted_continues_after_the_recovery_note(
        transactional_db, people, browser):
    server = serve_on("0")
    port = str(urlparse(server.url).port)
    restarted = None
    try:
        sign_in(browser, server.url, "olga", "/chat/")
        thread_id = start_chat(browser, "assistant", "Tell Ada the build is green")
        # Killed while step 1 streams: after the lookup's result, once its text began.
        wait(browser, lambda driver: [c for c, _ in driver.execute_script(ENTRIES)][-2:] == [
            "entry tool-result", "entry text"], 30)
        server.process.kill()
        server.process.wait()
        browser.execute_script("window.__notReloaded = true;")
        cut = browser.execute_script(ENTRIES)
        time.sleep(1)
        restarted = serve_on(port)
        wait(browser, lambda driver: status(driver) == "Waiting for your answer.", 90)
    finally:
        server.stop()
        if restarted is not None:
            restarted.stop()
    entries = browser.execute_script(ENTRIES)
    assert browser.execute_script("return window.__notReloaded === true")
    notes = [index for index, (classes, _) in enumerate(entries) if classes == "entry notice"]
    assert len(notes) == 1, entries
    assert entries[:notes[0]] == cut[:3]  # step 0 stays; the dead leg's partial step 1 is set aside
    [run] = turn_runs(thread_id)
    said = [part["text"] for message in run_latest_messages(run=run) if message["role"] == "assistant"
            for part in message["content"] if part["type"] == "text"]
    assert [text for classes, text in entries[notes[0] + 1:] if classes == "entry text"] == [f"assistant{said[-1]}"]
    assert [classes for classes, _ in entries[notes[0] + 1:]] == ["entry text", "entry tool-call", "entry approval"]
    assert any(part["type"] == "recovery" for part in journal_parts(run.run_id))


@pytest.mark.browser
def test_a_reviewers_agent_waits_for_a_reviewer_and_goes_on_when_one_approves(people, server, browser):
    sign_in(browser, server, "olga", "/chat/")
    thread_id = start_chat(browser, "reimbursement", "Reimburse exp-1042")
    wait(browser, lambda driver: status(driver) == "Waiting for a reviewer.")
    assert "Waiting for a reviewer: pay_expense" in text_of(browser, "#chat-approvals")
    assert not browser.find_elements(By.CSS_SELECTOR, ".chat-verdict button")  # not hers to decide
    assert is_disabled(browser)
    browser.execute_script("window.__notReloaded = true;")
    shot(browser, "chat-waiting-for-a-reviewer")

    [run] = turn_runs(thread_id)
    request = ApprovalRequest.objects.get(run=run)
    assert api_post(server, f"api/runs/{run.run_id}/approvals/{request.approval_id}/", people["rita"],
                    {"approved": True, "token": request.token}) == 200  # the reviewer, through the API
    wait(browser, lambda driver: status(driver) == "The turn is over (completed).")
    assert browser.execute_script("return window.__notReloaded === true")
    assert "Approved by rita" in text_of(browser, "#transcript .entry.verdict")
    assert "transaction tx-" in texts_of(browser, "#transcript p.assistant-text")[-1]
    assert not is_disabled(browser)
    assert text_of(browser, "#latest-turn .turn-status") == "completed"  # its heading too, not what it said on load


@pytest.mark.browser
def test_the_chat_pages_have_no_serious_accessibility_violation(people, server, browser):
    sign_in(browser, server, "olga", "/chat/")
    found = {"chat-list": axe_violations(browser)}
    start_chat(browser, "assistant", "Tell Alan the tests pass")
    wait(browser, lambda driver: status(driver) == "Waiting for your answer.")
    found["chat-approval"] = axe_violations(browser)
    browser.find_element(By.CSS_SELECTOR, ".chat-verdict button.danger").click()
    wait(browser, lambda driver: status(driver) == "The turn is over (completed).")
    found["chat-finished"] = axe_violations(browser)
    browser.get(f"{server}chat/")
    found["chat-list-with-a-thread"] = axe_violations(browser)
    assert Thread.objects.count() == 1
    serious = {name: [v for v in violations if v["impact"] in {"serious", "critical"}]
               for name, violations in found.items()}
    assert {name: violations for name, violations in serious.items() if violations} == {}


# How far the page is wider than its window (0: nothing scrolls sideways).
OVERFLOW = "return document.documentElement.scrollWidth - document.documentElement.clientWidth"


@pytest.mark.browser
def test_a_long_unbroken_message_wraps_instead_of_widening_the_page(people, server, browser):
    sign_in(browser, server, "olga", "/chat/")
    start_chat(browser, "assistant", "Tell Ada: " + "x" * 300 + " https://example.test/" + "a/b" * 80)
    wait(browser, lambda driver: status(driver) == "Waiting for your answer.")
    assert browser.execute_script(OVERFLOW) == 0  # the streamed transcript
    browser.refresh()
    wait(browser, lambda driver: status(driver) == "Waiting for your answer.")
    assert browser.execute_script(OVERFLOW) == 0  # the server's rendering of it
