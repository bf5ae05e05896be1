"""A busy queue in headless Chromium against a real `manage.py serve` that emails reviewers into the file back end:
the email's link opens the decide page; a reviewer filters the console by agent and keeps the filter across a
reload; "Cancel this run" asks to confirm before it cancels; axe-core finds no serious violation on those pages or
on /account/, where a reviewer turns the emails off."""

from __future__ import annotations

import email
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from approvals.roles import REVIEWERS_GROUP
from notifications.selectors import email_preference_get
from runs.models import Run
from tests.browser.test_people import (
    DESKTOP, PASSWORD, axe_violations, shot, sign_in, text_of, wait, wait_for_status, wait_live,
)
from tests.factories import make_queued_run, make_user
from tests.processes import wait_until

PUBLIC = "https://deuz.example.com"


@pytest.fixture
def people(server_passwords, db):
    return {
        "olga": make_user("olga", password=PASSWORD, email="olga@example.test"),
        "rita": make_user("rita", REVIEWERS_GROUP, password=PASSWORD, is_staff=True, email="rita@example.test"),
    }


@pytest.fixture
def mail_folder(tmp_path) -> Path:
    return tmp_path / "mail"


@pytest.fixture
def server(serve, browser, mail_folder) -> str:
    browser.set_window_size(*DESKTOP)
    return serve("--workers", "1", EMAIL_URL=f"file://{mail_folder}", DEUZ_PUBLIC_URL=PUBLIC)


def mails_in(folder: Path) -> list[email.message.Message]:
    found = []
    for path in sorted(folder.glob("*.log")) if folder.exists() else []:
        found += [email.message_from_string(chunk.strip()) for chunk in path.read_text().split("-" * 79)
                  if chunk.strip()]
    return found


def serious(violations: list[dict]) -> list[dict]:
    return [v for v in violations if v["impact"] in {"serious", "critical"}]


@pytest.mark.browser
def test_the_emailed_link_opens_the_decide_page_and_the_console_filters_by_agent(people, server, browser,
                                                                                 mail_folder):
    for run_id, agent in (("busy-1", "reimbursement"), ("busy-2", "reimbursement"), ("busy-3", "coder")):
        make_queued_run(run_id, agent=agent, user=people["olga"])
        wait_for_status(run_id, "suspended")
    wait_until(lambda: len(mails_in(mail_folder)) == 3, timeout=60, what="three emails to rita")
    coder_mail = next(m for m in mails_in(mail_folder) if "busy-3" in m["Subject"])
    assert coder_mail["To"] == "rita@example.test"
    link = next(line.split("Decide it:", 1)[1].strip() for line in coder_mail.get_payload(decode=True).decode().splitlines()
                if "Decide it:" in line)
    assert link.startswith(PUBLIC + "/console/busy-3/")  # built from DEUZ_PUBLIC_URL, not the Host header
    path = urlparse(link).path
    sign_in(browser, server, "rita", path)
    heading = lambda driver: text_of(driver, "main h1")  # noqa: E731
    wait(browser, lambda driver: "Approve or deny" in heading(driver), 10)
    assert "run_shell" in heading(browser), browser.page_source[:3000]

    browser.get(server + "console/")
    wait(browser, lambda driver: len(driver.find_elements(By.CSS_SELECTOR, "li.queue-item")) == 3)
    Select(browser.find_element(By.ID, "id_agent")).select_by_value("coder")
    browser.find_element(By.CSS_SELECTOR, "#queue-filters button[type=submit]").click()
    wait(browser, lambda driver: parse_qs(urlparse(driver.current_url).query).get("agent") == ["coder"])
    items = browser.find_elements(By.CSS_SELECTOR, "li.queue-item")
    assert [item.get_attribute("data-run-id") for item in items] == ["busy-3"]
    assert "(1 matching the filters)" in text_of(browser, "#pending-heading")
    shot(browser, "console-filtered")
    assert serious(axe_violations(browser)) == []
    browser.refresh()  # the filters live in the URL
    wait(browser, lambda driver: len(driver.find_elements(By.CSS_SELECTOR, "li.queue-item")) == 1)
    assert Select(browser.find_element(By.ID, "id_agent")).first_selected_option.get_attribute("value") == "coder"


@pytest.mark.browser
def test_cancel_asks_to_confirm_before_it_cancels(people, server, browser):
    make_queued_run("busy-cancel", user=people["olga"])
    wait_for_status("busy-cancel", "suspended")
    sign_in(browser, server, "olga", "/runs/busy-cancel/")
    wait_live(browser)
    # Typed and pressed in one script: the summary is a live region, which a live update may replace in between.
    browser.execute_script("""const form = document.querySelector("form.cancel-form");
        form.querySelector("#cancel-reason").value = arguments[0];
        form.querySelector("button[type=submit]").click();""", "Filed twice")
    wait(browser, lambda driver: driver.find_elements(By.CSS_SELECTOR, "section.confirm"))
    assert "Cancel run busy-cancel?" in text_of(browser, "#confirm-heading")
    assert "Filed twice" in text_of(browser, "section.confirm")
    assert Run.objects.get(run_id="busy-cancel").status == "suspended"  # one click cancels nothing
    shot(browser, "run-cancel-confirm")
    assert serious(axe_violations(browser)) == []
    browser.find_element(By.CSS_SELECTOR, "section.confirm button[type=submit]").click()
    wait(browser, lambda driver: urlparse(driver.current_url).path == "/runs/busy-cancel/")
    run = wait_for_status("busy-cancel", "cancelled")
    assert run.cancel_reason == "Filed twice"


@pytest.mark.browser
def test_a_reviewer_turns_the_emails_off_on_the_account_page(people, server, browser):
    sign_in(browser, server, "rita", "/account/")
    box = browser.find_element(By.ID, "id_review_requests")
    assert box.is_selected()
    shot(browser, "account")
    assert serious(axe_violations(browser)) == []
    box.click()
    browser.find_element(By.CSS_SELECTOR, "main form button[type=submit]").click()
    wait(browser, lambda driver: "Emails about approval requests are off." in driver.page_source)
    assert email_preference_get(user=people["rita"]).review_requests is False
