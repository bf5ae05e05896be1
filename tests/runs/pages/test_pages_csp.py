"""The pages this app adds pass the enforced Content-Security-Policy: no inline script or style without the
response's nonce, every asset from this origin (the data block of the live page's verdicts is not a script)."""

from __future__ import annotations

import pytest

from tests.csp import csp_problems

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("enforced_csp")]


@pytest.mark.parametrize(("role", "method", "path", "status"), [
    ("anonymous", "get", "/accounts/login/", 200),
    ("reviewer", "post", "/accounts/logout/", 200),
    ("plain", "get", "/accounts/password_change/", 200),
    ("support", "get", "/console/", 403),
    ("support", "get", "/runs/?status=bogus", 400),
    ("owner", "get", "/runs/r1/", 200),
    ("owner", "get", "/runs/r1/live/", 200),
    ("reviewer", "post", "/console/r1/{approval}/", 200),  # the confirmation step
    ("superuser", "get", "/admin/approvals/approvalrequest/", 200),
])
def test_the_page_passes_its_policy(browser_for, suspended, role, method, path, status):
    client = browser_for(role)
    body = {"verdict": "approve"} if "console/r1" in path else {}
    response = getattr(client, method)(path.format(approval=suspended.approval_id), body)
    assert response.status_code == status
    assert csp_problems(response) == []


def test_the_live_pages_verdicts_are_a_data_block(browser_for, suspended, decide):
    decide(suspended, approved=False, reason="</script><script>alert(1)</script>")
    html = browser_for("owner").get("/runs/r1/live/").content.decode()
    block = html.split('<script id="run-verdicts" type="application/json">', 1)[1].split("</script>", 1)[0]
    assert "Denied by rita" in block and "<script>" not in block
