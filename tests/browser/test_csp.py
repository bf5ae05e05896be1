"""Every page under the enforced Content-Security-Policy in headless Chromium: no violation, and the pages'
scripts (Swagger UI, the live transcript, the admin's) still run."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from approvals.models import ApprovalRequest
from runs.models import Run
from tests.factories import make_queued_run, make_user

USERNAME, PASSWORD = "csp-root", "a-long-enough-password-1"

# Injected before any page script (CDP scripts are exempt from the page's CSP): every violation, kept per page.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(`${event.effectiveDirective} blocked ${event.blockedURI || "inline"}`
    + ` at ${event.sourceFile}:${event.lineNumber} (${event.disposition})`);
});
"""


@pytest.fixture
def root(server_passwords, db):
    return make_user(USERNAME, password=PASSWORD, is_staff=True, is_superuser=True)


def visit(browser, url: str, *, ready: str = "main, #content, #swagger-ui") -> list[str]:
    """Open ``url``, wait until ``ready`` has rendered, and return the CSP violations it raised."""
    browser.get(url)
    WebDriverWait(browser, 30).until(lambda driver: driver.find_elements(By.CSS_SELECTOR, ready))
    return browser.execute_script("return window.__cspViolations")


@pytest.mark.browser
def test_every_page_runs_under_the_enforced_policy_without_a_violation(serve, root, browser):
    server = serve("--workers", "1")
    make_queued_run("csp-1")
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_VIOLATIONS})

    violations = {"login": visit(browser, f"{server}admin/login/?next=/runs/")}
    browser.find_element(By.NAME, "username").send_keys(USERNAME)
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "[type=submit]").click()
    WebDriverWait(browser, 30).until(lambda driver: urlparse(driver.current_url).path == "/runs/")

    # The live page renders the run until it waits for review: its module script and its stream both ran.
    violations["live (SSE)"] = visit(browser, f"{server}runs/csp-1/live/", ready=".approval-line")
    violations["live (WebSocket)"] = visit(
        browser, f"{server}runs/csp-1/live/?transport=websocket", ready=".approval-line"
    )
    request = ApprovalRequest.objects.get(run__run_id="csp-1")
    run = Run.objects.get(run_id="csp-1")
    pages = {
        "home": "", "runs": "runs/", "timeline": "runs/csp-1/", "console": "console/",
        "console request": f"console/csp-1/{request.approval_id}/", "404": "runs/no-such-run/",
        "admin": "admin/", "admin runs": "admin/runs/run/", "admin run": f"admin/runs/run/{run.pk}/change/",
        "admin approval": f"admin/approvals/approvalrequest/{request.pk}/change/", "api tokens": "account/tokens/",
    }
    for name, path in pages.items():
        violations[name] = visit(browser, server + path)
    # Swagger UI rendered the schema: its bundle and its nonce-carrying init script both ran.
    violations["api docs"] = visit(browser, f"{server}api/docs/", ready=".swagger-ui .info .title")
    assert "Deuz API" in browser.find_element(By.CSS_SELECTOR, ".swagger-ui .info .title").text

    assert {name: found for name, found in violations.items() if found} == {}
