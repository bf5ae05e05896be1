"""Four eyes and edit-then-approve in headless Chromium against a real `manage.py serve`: the reviewer who started
a run reviewers decide sees no Approve and a forged POST gets 403; another reviewer edits the amount and approves,
and the transcript, the timeline and the ledger show the edited input with who; axe-core finds nothing serious on
the decide page (with its four-eyes note, its edit box and its confirmation)."""

from __future__ import annotations

import json

import pytest
from selenium.webdriver.common.by import By

from approvals.models import ApprovalRequest
from approvals.roles import REVIEWERS_GROUP
from runs.models import Effect, Run
from tests.browser.test_people import (
    PASSWORD,
    axe_violations,
    post_from_page,
    server,  # noqa: F401 (a fixture)
    sign_in,
    text_of,
    wait,
    wait_for_status,
    waiting_for_review,
)
from tests.factories import make_user


@pytest.fixture
def people(server_passwords, db):
    """cora is a reviewer who starts runs; rita is another reviewer."""
    return {"cora": make_user("cora", REVIEWERS_GROUP, password=PASSWORD, is_staff=True),
            "rita": make_user("rita", REVIEWERS_GROUP, password=PASSWORD, is_staff=True)}


def serious(browser) -> list[dict]:
    return [violation for violation in axe_violations(browser) if violation["impact"] in {"serious", "critical"}]


@pytest.mark.browser
def test_the_creator_of_a_reviewers_run_sees_no_approve_and_a_forged_post_gets_403(people, server, browser):
    request = waiting_for_review("eyes-1", people["cora"])
    path = f"/console/eyes-1/{request.approval_id}/"
    sign_in(browser, server, "cora", path)
    assert "Another reviewer must decide this request" in text_of(browser, "#four-eyes")
    assert not browser.find_elements(By.CSS_SELECTOR, "button.approve, button.danger, [name=verdict]")
    assert serious(browser) == []
    assert post_from_page(browser, path, "verdict=approve&confirm=yes") == 403
    request.refresh_from_db()
    assert (request.status, Run.objects.get(run_id="eyes-1").status) == ("pending", "suspended")


@pytest.mark.browser
def test_a_reviewer_edits_the_amount_and_approves_and_every_view_shows_the_edit_with_who(people, server, browser):
    request = waiting_for_review("edit-1", people["cora"])
    sign_in(browser, server, "rita", f"/console/edit-1/{request.approval_id}/")
    assert serious(browser) == []
    box = browser.find_element(By.ID, "edited-input")
    edited = {**json.loads(box.get_attribute("value")), "amount": "80.00"}
    box.clear()
    box.send_keys(json.dumps(edited))
    browser.find_element(By.CSS_SELECTOR, "form.edit-form button.approve").click()
    wait(browser, lambda driver: driver.find_elements(By.CSS_SELECTOR, 'section.confirm[data-verdict="edit"]'))
    assert "80.00" in text_of(browser, "section.confirm") and serious(browser) == []
    browser.find_element(By.CSS_SELECTOR, "section.confirm button[type=submit]").click()
    wait(browser, lambda driver: "approved with your edit" in text_of(driver, ".messages"))
    wait_for_status("edit-1", "completed")

    effect = Effect.objects.get(run__run_id="edit-1", tool_name="pay_expense")
    assert (effect.request["amount"], effect.approval["edited_by"]) == ("80.00", "rita")  # the ledger's row

    browser.get(f"{server}runs/edit-1/")
    timeline = text_of(browser, "ol.steps")
    assert "Approved with an edit: pay_expense" in timeline and 'edited by rita: amount "84.20" → "80.00"' in timeline
    assert "Edited by rita before approving" in text_of(browser, "#run-story")

    browser.get(f"{server}runs/edit-1/live/")
    wait(browser, lambda driver: text_of(driver, "#run-status") == "Finished.")
    transcript = text_of(browser, "#transcript")
    assert "Ran with the input rita edited before approving" in transcript and '"80.00"' in transcript
    assert "Approved by rita with an edited input" in text_of(browser, ".entry.verdict")
    assert ApprovalRequest.objects.get(pk=request.pk).edited_input == edited
