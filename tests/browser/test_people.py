"""The people side in headless Chromium against a real `manage.py serve`, one test per role's story: a reviewer
signs in at the site's own page, sees a new request arrive live, approves it, and the open live page finishes
without a reload; a denial and its reason reach the transcript and the run list; support reads the timeline with
no decision control and a forged verdict is refused; a plain user cannot read or cancel another's run; and axe-core
finds no serious accessibility violation on any page. Screenshots go to tests/browser/artifacts/ (git-ignored)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from accounts.models import ApiToken
from approvals.models import ApprovalRequest
from approvals.roles import REVIEWERS_GROUP, SUPPORT_GROUP
from runs.models import Run
from tests.factories import make_queued_run, make_user
from tests.processes import wait_until

PASSWORD = "a-long-enough-password-1"
ARTIFACTS = Path(__file__).parent / "artifacts"
AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
DESKTOP, PHONE = (1280, 900), (390, 844)

# axe-core's findings on the page, reduced to what a failure message needs.
RUN_AXE = """
const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ["violations"]})
  .then((result) => done(result.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ")),
  }))))
  .catch((error) => done([{id: "axe-error", impact: "critical", help: String(error), nodes: []}]));
"""


@pytest.fixture
def people(server_passwords, db):
    """olga starts runs; rita reviews; sue is support; pat is a plain user; root is a superuser."""
    return {
        "olga": make_user("olga", password=PASSWORD),
        "rita": make_user("rita", REVIEWERS_GROUP, password=PASSWORD, is_staff=True),
        "sue": make_user("sue", SUPPORT_GROUP, password=PASSWORD, is_staff=True),
        "pat": make_user("pat", password=PASSWORD),
        "root": make_user("root", password=PASSWORD, is_staff=True, is_superuser=True),
    }


def shot(browser, name: str, size: tuple[int, int] = DESKTOP) -> None:
    """Save a screenshot of the whole page (not only what the window shows) at ``size``'s width."""
    import base64

    ARTIFACTS.mkdir(exist_ok=True)
    browser.set_window_size(*size)
    metrics = browser.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    image = browser.execute_cdp_cmd("Page.captureScreenshot", {
        "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": metrics["width"], "height": min(metrics["height"], 12000), "scale": 1},
    })
    (ARTIFACTS / f"{name}-{size[0]}.png").write_bytes(base64.b64decode(image["data"]))
    if size != DESKTOP:
        browser.set_window_size(*DESKTOP)


@pytest.fixture
def server(serve, browser) -> str:
    """The site served with one embedded worker, the browser's window at desktop size; returns the site's URL."""
    browser.set_window_size(*DESKTOP)
    return serve("--workers", "1")


def wait(browser, condition, timeout: float = 60):
    return WebDriverWait(browser, timeout, poll_frequency=0.1).until(condition)


def sign_in(browser, server: str, username: str, path: str) -> None:
    """Open ``path``, get sent to the site's sign-in page, sign in, and come back to ``path``."""
    browser.get(server + path.lstrip("/"))
    assert urlparse(browser.current_url).path == "/accounts/login/"
    browser.find_element(By.NAME, "username").send_keys(username)
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "form.sign-in [type=submit]").click()
    wait(browser, lambda driver: urlparse(driver.current_url).path == path.split("?")[0], 30)


def confirm_in_the_console(browser, verdict: str, *, says: str) -> None:
    """On a console request page: press the ``verdict``'s button, read that the confirmation ``says`` what will
    happen (a screenshot of it kept), confirm, and land back on the queue."""
    browser.find_element(By.CSS_SELECTOR, "button.approve" if verdict == "approve" else "button.danger").click()
    wait(browser, lambda driver: driver.find_elements(By.CSS_SELECTOR, f'section.confirm[data-verdict="{verdict}"]'))
    assert says in text_of(browser, "section.confirm")
    shot(browser, f"console-confirm-{verdict}")
    browser.find_element(By.CSS_SELECTOR, "section.confirm button[type=submit]").click()
    wait(browser, lambda driver: urlparse(driver.current_url).path == "/console/")


def wait_live(browser) -> None:
    """Until the page follows its live topics."""
    wait(browser, lambda driver: driver.find_elements(By.CSS_SELECTOR, 'main[data-live-state="live"]'), 30)


def wait_for_status(run_id: str, status: str) -> Run:
    return wait_until(lambda: Run.objects.filter(run_id=run_id, status=status).first(),
                      what=f"run {run_id} to reach {status}")


def waiting_for_review(run_id: str, user, *, agent: str = "reimbursement") -> ApprovalRequest:
    """The request of a run ``user`` started, once the server's worker suspended it waiting for a reviewer."""
    make_queued_run(run_id, agent=agent, user=user)
    wait_for_status(run_id, "suspended")
    return ApprovalRequest.objects.get(run__run_id=run_id)


# A same-origin POST from the open page with its CSRF cookie, as a crafted page or a console script would send.
POST_FROM_PAGE = """
const [path, body, done] = arguments;
const csrf = document.cookie.split("; ").find((c) => c.startsWith("csrftoken="))?.split("=")[1] ?? "";
const headers = body === null ? {"X-CSRFToken": csrf}
  : {"X-CSRFToken": csrf, "Content-Type": "application/x-www-form-urlencoded"};
fetch(path, {method: "POST", credentials: "same-origin", headers, body: body ?? undefined})
  .then((response) => done(response.status), (error) => done(String(error)));
"""


def post_from_page(browser, path: str, body: str | None = None) -> int | str:
    """The status of that POST (or the fetch's error)."""
    return browser.execute_async_script(POST_FROM_PAGE, path, body)


def text_of(browser, selector: str) -> str:
    """The text of the first match, read in one script: a live update may replace the element at any time."""
    return browser.execute_script("return document.querySelector(arguments[0])?.textContent ?? ''", selector)


def click(browser, selector: str) -> None:
    """Click the first match, finding it again if a live update replaced it in between."""
    for _ in range(10):
        try:
            browser.find_element(By.CSS_SELECTOR, selector).click()
            return
        except StaleElementReferenceException:
            time.sleep(0.1)
    raise AssertionError(f"{selector} kept being replaced")


def texts_of(browser, selector: str) -> list[str]:
    return browser.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map((node) => node.textContent)", selector)


def attribute_of(browser, selector: str, name: str) -> str | None:
    return browser.execute_script("return document.querySelector(arguments[0])?.getAttribute(arguments[1])",
                                  selector, name)


@pytest.mark.browser
def test_a_reviewer_sees_a_request_arrive_live_approves_it_and_the_live_page_finishes(people, server, browser):
    sign_in(browser, server, "rita", "/console/")
    wait_live(browser)
    console = browser.current_window_handle
    assert not browser.find_elements(By.CSS_SELECTOR, '.queue-item[data-run-id="people-1"]')

    make_queued_run("people-1", user=people["olga"])
    wait(browser, lambda driver: driver.find_elements(By.CSS_SELECTOR, '.queue-item[data-run-id="people-1"]'))
    assert "Reimburse exp-1042" in text_of(browser, '.queue-item[data-run-id="people-1"]')
    shot(browser, "console-queue-with-a-new-request")

    browser.switch_to.new_window("tab")
    live = browser.current_window_handle
    browser.get(f"{server}runs/people-1/live/")
    wait(browser, lambda driver: driver.find_elements(By.CSS_SELECTOR, ".approval-line"))
    wait(browser, lambda driver: text_of(driver, "#run-status") == "Waiting for review: pay_expense.")
    browser.execute_script("window.__notReloaded = true;")

    browser.switch_to.window(console)
    click(browser, '.queue-item[data-run-id="people-1"] a.review-link')
    wait(browser, lambda driver: driver.find_elements(By.CSS_SELECTOR, "button.approve"))
    assert "approved by finance" in text_of(browser, ".evidence-list")
    shot(browser, "console-request")
    shot(browser, "console-request", PHONE)
    confirm_in_the_console(browser, "approve", says="calls pay_expense once")
    assert "pay_expense in run people-1 approved." in text_of(browser, ".messages")
    assert not browser.find_elements(By.CSS_SELECTOR, '.queue-item[data-run-id="people-1"]')

    browser.switch_to.window(live)
    wait(browser, lambda driver: text_of(driver, "#run-status") == "Finished.")
    assert browser.execute_script("return window.__notReloaded === true")  # the same page, never reloaded
    assert "Approved by rita" in text_of(browser, ".entry.verdict")
    texts = texts_of(browser, "p.assistant-text")
    assert "transaction tx-" in texts[-1]
    shot(browser, "live-transcript-finished")
    assert Run.objects.get(run_id="people-1").status == "completed"


@pytest.mark.browser
def test_a_denial_and_its_reason_reach_the_transcript_and_the_run_list_live(people, server, browser):
    request = waiting_for_review("people-2", people["olga"])

    sign_in(browser, server, "rita", "/runs/")
    wait_live(browser)
    run_list = browser.current_window_handle
    row = '[data-run-id="people-2"]'
    assert "Needs a verdict on pay_expense" in text_of(browser, row)

    browser.switch_to.new_window("tab")
    live = browser.current_window_handle
    browser.get(f"{server}runs/people-2/live/")
    wait(browser, lambda driver: text_of(driver, "#run-status") == "Waiting for review: pay_expense.")

    browser.switch_to.new_window("tab")
    timeline = browser.current_window_handle
    browser.get(f"{server}runs/people-2/")
    wait_live(browser)
    assert attribute_of(browser, "#state-box", "data-state") == "waiting"

    browser.switch_to.new_window("tab")
    browser.get(f"{server}console/people-2/{request.approval_id}/")
    browser.find_element(By.ID, "reason").send_keys("Duplicate of exp-1041")
    confirm_in_the_console(browser, "deny", says="with your reason: “Duplicate of exp-1041”")

    browser.switch_to.window(live)
    wait(browser, lambda driver: text_of(driver, "#run-status") == "Finished.")
    verdict = text_of(browser, ".entry.verdict.denied")
    assert "Denied by rita" in verdict and "Duplicate of exp-1041" in verdict
    assert "The payment was not made" in texts_of(browser, "p.assistant-text")[-1]
    shot(browser, "live-transcript-denied")

    browser.switch_to.window(timeline)  # the run's page changed state on its own too
    wait(browser, lambda driver: attribute_of(driver, "#state-box", "data-state") == "completed")
    assert "Denied: pay_expense: by rita: Duplicate of exp-1041" in " ".join(text_of(browser, "ol.steps").split())

    browser.switch_to.window(run_list)
    wait(browser, lambda driver: "Denied: pay_expense by rita (Duplicate of exp-1041)" in text_of(driver, row))
    shot(browser, "run-list-after-a-denial")
    shot(browser, "run-list-after-a-denial", PHONE)


@pytest.mark.browser
def test_support_reads_the_timeline_with_no_decision_control_and_a_forged_verdict_is_refused(people, server, browser):
    request = waiting_for_review("people-3", people["olga"])

    sign_in(browser, server, "sue", "/runs/people-3/")
    assert "Proposed: pay_expense" in text_of(browser, "ol.steps")
    assert "lookup_expense" in text_of(browser, "#run-story")
    assert not browser.find_elements(By.CSS_SELECTOR, "button.approve, button.danger, [name=verdict]")
    header = text_of(browser, "header")
    assert "Approvals" not in header and "sue (support)" in header
    shot(browser, "support-timeline")
    shot(browser, "support-timeline", PHONE)

    browser.get(f"{server}console/people-3/{request.approval_id}/")
    assert "The console is for reviewers" in text_of(browser, "main")
    shot(browser, "support-console-refused")

    forged = post_from_page(browser, f"/console/people-3/{request.approval_id}/", "verdict=approve&confirm=yes")
    assert forged == 403
    request.refresh_from_db()
    assert (request.status, Run.objects.get(run_id="people-3").status) == ("pending", "suspended")


@pytest.mark.browser
def test_a_plain_user_can_neither_read_nor_cancel_anothers_run(people, server, browser):
    waiting_for_review("people-4", people["olga"])
    make_queued_run("mine-4", user=people["pat"], messages=[{"role": "user", "content": "Reimburse exp-2077"}])

    sign_in(browser, server, "pat", "/runs/")
    listed = browser.execute_script(
        "return [...document.querySelectorAll('tr[data-run-id]')].map((row) => row.dataset.runId)")
    assert listed == ["mine-4"]
    browser.get(f"{server}runs/people-4/")
    assert text_of(browser, "h1") == "Not found"
    assert post_from_page(browser, "/runs/people-4/cancel/") == 404
    assert Run.objects.get(run_id="people-4").status == "suspended"


def axe_violations(browser) -> list[dict]:
    """Every violation axe-core finds on the page (injected by the test, so the site never serves it)."""
    browser.set_script_timeout(60)
    browser.execute_script(AXE.read_text(encoding="utf-8"))
    assert browser.execute_script("return typeof axe.run") == "function"  # injected despite the page's CSP
    return browser.execute_async_script(RUN_AXE)


@pytest.mark.browser
def test_no_page_has_a_serious_accessibility_violation(people, server, browser):
    make_queued_run("people-5", user=people["olga"])
    make_queued_run("people-6", agent="coder", user=people["olga"])
    wait_for_status("people-5", "suspended")
    wait_for_status("people-6", "suspended")
    request = ApprovalRequest.objects.get(run__run_id="people-5")
    admin_request = ApprovalRequest.objects.get(run__run_id="people-6")

    found: dict[str, list[dict]] = {}
    report: dict[str, list[dict]] = {}  # every finding, minor ones too, kept with the screenshots

    def check(name: str, path: str | None = None, ready: str = "main, #content") -> None:
        if path is not None:
            browser.get(server + path.lstrip("/"))
        wait(browser, lambda driver: driver.find_elements(By.CSS_SELECTOR, ready), 30)
        report[name] = axe_violations(browser)
        found[name] = [v for v in report[name] if v["impact"] in {"serious", "critical"}]
        shot(browser, f"page-{name}")
        shot(browser, f"page-{name}", PHONE)

    check("sign-in", "/accounts/login/")
    sign_in(browser, server, "root", "/runs/")
    check("home", "/")
    check("run-list", "/runs/")
    check("run-list-bad-filter", "/runs/?status=bogus")
    check("timeline", "/runs/people-5/")
    check("timeline-sub-agent", "/runs/people-6/")
    check("live-transcript", "/runs/people-5/live/", ready=".approval-line")
    check("console", "/console/")
    check("console-request", f"/console/people-5/{request.approval_id}/")
    browser.find_element(By.CSS_SELECTOR, "button.approve").click()
    check("console-confirm", ready="section.confirm")
    check("not-found", "/runs/no-such-run/")
    check("admin-approvals", "/admin/approvals/approvalrequest/", ready="#result_list")
    check("admin-approval", f"/admin/approvals/approvalrequest/{admin_request.pk}/change/", ready="#content")
    check("admin-runs", "/admin/runs/run/", ready="#result_list")
    check("api-tokens", "/account/tokens/")
    browser.find_element(By.ID, "id_name").send_keys("axe")
    browser.find_element(By.CSS_SELECTOR, "main form [type=submit]").click()
    check("api-token-made", ready=".new-token")
    check("api-token-revoke", f"/account/tokens/{ApiToken.objects.get(name='axe').pk}/revoke/", ready="section.confirm")
    (ARTIFACTS / "axe-report.json").write_text(json.dumps(report, indent=2))
    assert {name: violations for name, violations in found.items() if violations} == {}


@pytest.mark.browser
def test_the_admins_approval_list_shows_the_input_and_agent_path_at_1280_px(people, server, browser):
    waiting_for_review("people-7", people["olga"], agent="coder")
    browser.set_window_size(*DESKTOP)
    sign_in(browser, server, "rita", "/console/")
    browser.get(f"{server}admin/approvals/approvalrequest/")
    width = browser.execute_script("return document.documentElement.clientWidth")
    for column in ("th.field-request_shown", "td.field-input_shown", "td.field-agent_path_shown", "td.field-verdict",
                   "td.field-expires_shown"):
        cell = browser.find_element(By.CSS_SELECTOR, f"#result_list {column}")
        box = browser.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.left, r.right];", cell)
        assert cell.is_displayed() and 0 <= box[0] and box[1] <= width, (column, box, width)
    assert '"command": "pytest -q tests/test_math.py"' in text_of(browser, "#result_list td.field-input_shown")
    assert text_of(browser, "#result_list td.field-agent_path_shown") == "coder"
    assert browser.execute_script("return document.documentElement.scrollWidth") <= width  # no sideways scroll
    assert browser.execute_script(  # nor inside the list's own scrolling box
        "const box = document.querySelector('.results'); return box.scrollWidth <= box.clientWidth")
    assert text_of(browser, "#result_list td.field-expires_shown").startswith("in 23")
    shot(browser, "admin-approval-list")
