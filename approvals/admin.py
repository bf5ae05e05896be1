"""Admin for approval requests: read-only, with Approve / Deny actions that call approval_decide,
as the API and the console do. The token is a bearer credential, so only its start is ever shown."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from approvals.access import DECIDE_APPROVALS
from approvals.errors import ApprovalError
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.admin import ReadOnlyAdmin, token_preview

ADMIN_REASON = "Decided in the admin"


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyAdmin):
    list_display = ["tool_name", "run", "status", "agent_path", "issued_at", "expires_at", "decided_by"]
    list_filter = ["status", "tool_name"]
    search_fields = ["run__run_id", "tool_name", "approval_id"]
    list_select_related = ["run", "decided_by"]
    date_hierarchy = "issued_at"
    # ``token`` is left out on purpose: whoever holds it can decide the call.
    fields = [
        "run", "revision", "approval_id", "tool_call_id", "tool_name", "tool_input", "agent_path", "token_start",
        "status", "issued_at", "expires_at", "decided_by", "decided_at", "reason",
    ]
    actions = ["approve_selected", "deny_selected"]

    @admin.display(description="token")
    def token_start(self, request: ApprovalRequest) -> str:
        return token_preview(request.token)

    @admin.action(description="Approve selected")
    def approve_selected(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]) -> None:
        self._decide(request, queryset, approved=True)

    @admin.action(description="Deny selected")
    def deny_selected(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]) -> None:
        self._decide(request, queryset, approved=False)

    def _decide(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest], *, approved: bool) -> None:
        # Checked here rather than hiding the action, so a staff user without the permission is told why.
        if not request.user.has_perm(DECIDE_APPROVALS):
            self.message_user(request, "You do not have permission to decide approval requests.", messages.ERROR)
            return
        decided = 0
        for approval in queryset.select_related("run").order_by("id"):
            try:
                approval_decide(
                    run_id=approval.run.run_id,
                    approval_id=approval.approval_id,
                    approved=approved,
                    token=approval.token,
                    reason=ADMIN_REASON,
                    user=request.user,
                )
            except ApprovalError as exc:
                self.message_user(request, f"{approval.tool_name} in {approval.run.run_id}: {exc}", messages.ERROR)
            else:
                decided += 1
        if decided:
            verdict = "approved" if approved else "denied"
            self.message_user(request, f"{decided} request(s) {verdict}.", messages.SUCCESS)
