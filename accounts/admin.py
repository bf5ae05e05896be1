"""Admin for API tokens: read-only (a key exists only when its owner makes it, at /account/tokens/, through the
API or `manage.py token create`), never showing a digest, with a Revoke action that calls token_revoke."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.errors import TokenNotFound
from accounts.models import ApiToken
from accounts.services import token_revoke
from runs.admin import NoWrites


@admin.register(ApiToken)
class ApiTokenAdmin(NoWrites, admin.ModelAdmin):
    list_display = ["name", "user", "prefix_shown", "created_at", "expires_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter), ("expires_at", admin.EmptyFieldListFilter),
                   "created_at"]
    search_fields = ["name", "prefix", "user__username"]
    list_select_related = ["user"]
    date_hierarchy = "created_at"
    # ``digest`` is left out: not a key, but nothing a person needs to read.
    fields = ["user", "name", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at"]
    actions = ["revoke_selected"]

    @admin.display(description="key starts with", ordering="prefix")
    def prefix_shown(self, token: ApiToken) -> str:
        return f"{token.prefix}…"

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        """Revoking is a change to a token, made by the service on its owner's behalf."""
        return request.user.has_perm("accounts.change_apitoken")

    @admin.action(description="Revoke selected tokens", permissions=["revoke"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = 0
        for token in queryset.select_related("user"):
            try:
                token_revoke(user=token.user, token_id=token.pk)
            except TokenNotFound:
                self.message_user(request, f"{token}: revoked already.", messages.WARNING)
            else:
                revoked += 1
        if revoked:
            self.message_user(request, f"{revoked} token(s) revoked: they no longer work.", messages.SUCCESS)
