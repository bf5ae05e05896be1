"""The live run page in headless Chromium against a real `manage.py serve`: a reload or a dead worker mid-stream
loses and repeats nothing on the page. The run's timeline keeps its record counters live, and says when its live
connection is lost."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from approvals.roles import SUPPORT_GROUP
from runs.models import Run
from deuz_project.database_url import database_url
from runs.selectors import run_checkpoint_list, run_checkpoint_rows, run_get, run_journal_count
from runs.stores.streams import DatabaseStreamStateStore
from tests.browser.serving import ServeProcess
from tests.environment import PRODUCTION_ENV, clean_env
from tests.factories import make_queued_run, make_user
from tests.processes import WorkerProcess

USERNAME, PASSWORD = "live-viewer", "a-long-enough-password-1"

# The page's own view of what it rendered: [step, text] per text block, in order.
RENDERED_TEXT = "return [...document.querySelectorAll('p.assistant-text')].map((p) => [Number(p.dataset.step), p.textContent])"


@pytest.fixture
def viewer(server_passwords, db):
    return make_user(USERNAME, SUPPORT_GROUP, password=PASSWORD, is_staff=True)  # support staff read every run


def log_in(browser, page_url: str) -> None:
    """Open a page that needs a user, get sent to the site's sign-in page, and sign in."""
    browser.get(page_url)
    assert urlparse(browser.current_url).path == "/accounts/login/"
    browser.find_element(By.NAME, "username").send_keys(USERNAME)
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "[type=submit]").click()
    WebDriverWait(browser, 30).until(lambda driver: urlparse(driver.current_url).path != "/accounts/login/")


def journal_text(run_id: str) -> list[list]:
    """[step, text] per step that streamed text, from every text-delta part in the run's journal."""
    blocks: list[list] = []
    step = 0
    for _, part in DatabaseStreamStateStore().read_sync(run_id, after=-1, limit=100_000).parts:
        assert part["type"] != "recovery", "no leg died in this test, so no step restarts"
        if part["type"] == "step-start":
            step = part["step_index"]
        elif part["type"] == "text-delta":
            if blocks and blocks[-1][0] == step:
                blocks[-1][1] += part["text"]
            else:
                blocks.append([step, part["text"]])
    return blocks


@pytest.mark.browser
@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_a_reload_mid_stream_resumes_exactly_where_rendering_stopped(serve, viewer, browser, transport):
    server = serve("--workers", "1")
    run_id = f"live-{transport}"
    page_url = f"{server}runs/{run_id}/live/" + ("?transport=websocket" if transport == "websocket" else "")
    log_in(browser, page_url)  # before the run exists: the page answers 404 until then

    make_queued_run(run_id, user=viewer)  # the run's creator may follow it
    browser.get(page_url)
    before_reload = WebDriverWait(browser, 30, poll_frequency=0.05).until(
        lambda driver: driver.execute_script(RENDERED_TEXT)
    )
    browser.refresh()
    announcement = WebDriverWait(browser, 60, poll_frequency=0.1).until(
        lambda driver: driver.find_element(By.ID, "run-announcement").get_attribute("textContent")
    )

    rendered = browser.execute_script(RENDERED_TEXT)
    journal = journal_text(run_id)
    assert "".join(text for _, text in rendered) == "".join(text for _, text in journal)
    assert rendered == journal  # one block per step, nothing repeated or lost at the reload
    # The reload came mid-stream, and the new page continued from the saved cursor rather than from the start.
    assert "".join(text for _, text in before_reload) != "".join(text for _, text in journal)
    resumed_from = int(browser.find_element(By.ID, "transcript").get_attribute("data-resumed-from"))
    last_seq = DatabaseStreamStateStore().read_sync(run_id).last_seq
    assert 0 <= resumed_from < last_seq
    approval = browser.find_element(By.CSS_SELECTOR, ".approval-line").get_attribute("textContent")
    assert approval.startswith('Waiting for review: pay_expense {"expense_id":"exp-1042"')
    assert announcement == "Waiting for review: pay_expense."
    assert Run.objects.get(run_id=run_id).status == Run.Status.SUSPENDED


def checkpoint_text(run_id: str) -> list[list]:
    """[step, text] of every assistant message with text in the run's latest checkpoint: what each step said in the end."""
    messages = run_checkpoint_list(run=run_get(run_id=run_id))[-1]["messages"]
    steps = [message for message in messages if message["role"] == "assistant"]
    return [
        [step, text]
        for step, message in enumerate(steps)
        if (text := "".join(part.get("text", "") for part in message["content"] if part["type"] == "text"))
    ]


@pytest.mark.browser
@pytest.mark.parametrize("fault", ["mid-stream:3", "mid-stream:10"], ids=["in-step-0", "in-step-1"])
def test_a_worker_killed_mid_stream_leaves_only_the_restarted_step_on_the_page(serve, viewer, browser, tmp_path, fault):
    """The follower continues the dead run; the page drops the dead leg's partial text of the step that restarts."""
    server = serve("--workers", "0")
    run_id = f"live-crash-{fault.replace(':', '-')}"
    page_url = f"{server}runs/{run_id}/live/"
    log_in(browser, page_url)

    worker = WorkerProcess("crashing", tmp_path, DEUZ_FAULT=fault, DEUZ_DEMO_DELAY_MS="120")
    try:
        make_queued_run(run_id, user=viewer)  # the run's creator may follow it
        browser.get(page_url)
        assert worker.wait_exit(timeout=60) == -9, worker.output  # the fault's SIGKILL, mid-stream
        announcement = WebDriverWait(browser, 60, poll_frequency=0.1).until(
            lambda driver: driver.find_element(By.ID, "run-announcement").get_attribute("textContent")
        )
    finally:
        worker.stop()

    assert announcement == "Waiting for review: pay_expense."
    assert browser.execute_script(RENDERED_TEXT) == checkpoint_text(run_id)
    parts = [part for _, part in DatabaseStreamStateStore().read_sync(run_id, after=-1, limit=100_000).parts]
    texts = "".join(part["text"] for part in parts if part["type"] == "text-delta")
    assert len(texts) > len("".join(text for _, text in checkpoint_text(run_id)))  # the dead leg's partial text is in the journal


@pytest.mark.django_db
def test_the_live_page_sends_a_visitor_without_a_login_to_sign_in(client):
    response = client.get("/runs/live-1/live/")
    assert response.status_code == 302
    assert response.url == "/accounts/login/?next=/runs/live-1/live/"


@pytest.mark.django_db
def test_the_live_page_of_an_unknown_run_is_not_found(client):
    client.force_login(make_user("ada"))
    assert client.get("/runs/no-such-run/live/").status_code == 404


# ------------------------------------------------------------------------------------------- the run's timeline

RECORD_COUNTS = "return document.getElementById('run-record-counts').textContent"


def record_counts(run_id: str) -> str:
    run = run_get(run_id=run_id)
    parts, checkpoints = run_journal_count(run=run), len(run_checkpoint_rows(run=run))
    return f"{parts} journal part{'s' if parts != 1 else ''}, {checkpoints} checkpoint{'s' if checkpoints != 1 else ''}"


@pytest.mark.browser
def test_the_timelines_record_counters_follow_the_run_live(serve, viewer, browser):
    server = serve("--workers", "1")
    page_url = f"{server}runs/live-counters/"
    log_in(browser, f"{server}runs/")
    make_queued_run("live-counters", user=viewer)
    browser.get(page_url)
    opened_with = browser.execute_script(RECORD_COUNTS)
    # A live update replaces the state box: an element found just before it may be gone when read.
    WebDriverWait(browser, 60, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda driver: driver.find_element(By.ID, "state-box").get_attribute("data-state") == "waiting")
    assert opened_with != record_counts("live-counters")  # opened mid-run, before the run's last records
    WebDriverWait(browser, 10, poll_frequency=0.1).until(
        lambda driver: driver.execute_script(RECORD_COUNTS) == record_counts("live-counters"))


@pytest.mark.browser
def test_a_timeline_whose_live_connection_drops_says_so(transactional_db, viewer, browser):
    environment = clean_env(DATABASE_URL=database_url(), **PRODUCTION_ENV)
    server = ServeProcess("--workers", "0", env=environment)
    try:
        make_queued_run("live-drop", user=viewer)
        log_in(browser, f"{server.url}runs/live-drop/")
        notice = browser.find_element(By.ID, "live-connection")
        WebDriverWait(browser, 30, poll_frequency=0.1).until(
            lambda driver: driver.find_element(By.ID, "main").get_attribute("data-live-state") == "live")
        assert not notice.is_displayed()
        server.stop()
        WebDriverWait(browser, 30, poll_frequency=0.1).until(lambda driver: notice.is_displayed())
    finally:
        server.stop()
    assert notice.text.startswith("Connection lost; reconnecting in ")
    assert notice.get_attribute("data-state") == "reconnecting" and notice.get_attribute("role") == "status"
