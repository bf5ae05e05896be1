"""Admin for approval requests: read-only, with Approve / Deny actions that call approval_decide,
as the API and the console do. The token is a bearer credential: only a preview of its digest is ever shown,
and only to users who may decide; the actions are offered to them alone."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince, timeuntil

from approvals.roles import approval_is_decidable_by
from approvals.errors import ApprovalError
from approvals.models import ApprovalRequest
from approvals.selectors import approval_state
from approvals.services import approval_decide
from runs.admin import ReadOnlyAdmin, token_preview
from runs.errors import SealedDataError
from runs.presenters.timeline import verdict_label
from runs.pages.tags import agent_path, json_compact, json_highlight

ADMIN_REASON = "Decided in the admin"
NOT_ALLOWED = "You do not have permission to decide approval requests."
DECISION_ACTIONS = ("approve_selected", "deny_selected")


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyAdmin):
    # Short columns, so the input and the agent path stay on screen at 1280 px (static/deuz/admin.css wraps them).
    list_display = ["request_shown", "input_shown", "agent_path_shown", "verdict", "expires_shown"]
    list_display_links = ["request_shown"]
    list_filter = ["status", "tool_name"]
    search_fields = ["run__run_id", "tool_name", "approval_id"]
    list_select_related = ["run", "decided_by"]
    date_hierarchy = "issued_at"
    # ``token`` is left out on purpose: whoever holds it can decide the call.
    fields = [
        "run", "revision", "approval_id", "tool_call_id", "tool_name", "input_pretty", "agent_path", "token_start",
        "status", "issued_at", "expires_at", "decided_by", "decided_at", "reason",
    ]
    readonly_fields = ["input_pretty"]
    token_fields = {"token_start": None}
    actions = list(DECISION_ACTIONS)

    class Media:
        css = {"all": ["deuz/admin.css"]}

    @admin.display(description="input")
    def input_shown(self, request: ApprovalRequest) -> str:
        try:
            return json_compact(request.tool_input, 160)
        except SealedDataError:
            return "(sealed with a key this server does not have)"

    @admin.display(description="agent path")
    def agent_path_shown(self, request: ApprovalRequest) -> str:
        return agent_path(request.agent_path)

    @admin.display(description="request", ordering="tool_name")
    def request_shown(self, request: ApprovalRequest) -> str:
        return format_html("{}<br><small>in run {}</small>", request.tool_name, request.run.run_id)

    @admin.display(description="verdict", ordering="status")
    def verdict(self, request: ApprovalRequest) -> str:
        return verdict_label(request)

    @admin.display(description="expires", ordering="expires_at")
    def expires_shown(self, request: ApprovalRequest) -> str:
        now, state = timezone.now(), approval_state(request)
        if state == ApprovalRequest.Status.PENDING:
            return f"in {timeuntil(request.expires_at, now)}"
        if state == ApprovalRequest.Status.EXPIRED:
            return f"expired {timesince(request.expires_at, now)} ago"
        return "—"  # decided, superseded or withdrawn before it could expire

    @admin.display(description="tool input")
    def input_pretty(self, request: ApprovalRequest) -> str:
        try:
            return format_html("{}", json_highlight(request.tool_input))
        except SealedDataError:
            return "(sealed with a key this server does not have)"

    @admin.display(description="token")
    def token_start(self, request: ApprovalRequest) -> str:
        return token_preview(request.token)

    def has_decide_permission(self, request: HttpRequest) -> bool:
        return approval_is_decidable_by(user=request.user)

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        # The actions are not offered to users who cannot decide, so Django would answer their forged POST with
        # "No action selected"; say why instead (the 403 page shows the reason), and decide nothing.
        if request.method == "POST" and not self.has_decide_permission(request) and any(
            action in DECISION_ACTIONS for action in request.POST.getlist("action")
        ):
            raise PermissionDenied(NOT_ALLOWED)
        return super().changelist_view(request, extra_context)

    @admin.action(description="Approve selected", permissions=["decide"])
    def approve_selected(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]) -> None:
        self._decide(request, queryset, approved=True)

    @admin.action(description="Deny selected", permissions=["decide"])
    def deny_selected(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]) -> None:
        self._decide(request, queryset, approved=False)

    def _decide(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest], *, approved: bool) -> None:
        if not self.has_decide_permission(request):  # a second line behind the hidden action
            raise PermissionDenied(NOT_ALLOWED)
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
            except (ApprovalError, PermissionDenied) as exc:  # PermissionDenied: four eyes, the run is theirs
                self.message_user(request, f"{approval.tool_name} in {approval.run.run_id}: {exc}", messages.ERROR)
            else:
                decided += 1
        if decided:
            verdict = "approved" if approved else "denied"
            self.message_user(request, f"{decided} request(s) {verdict}.", messages.SUCCESS)
