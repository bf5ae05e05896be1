"""Admin for runs and their records. Everything is read-only: runs change only through the services,
and the admin's actions call the same services as the API."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import partial
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join

from approvals.roles import approval_is_decidable_by
from runs.access import VIEW_EVERY_RUN, effect_is_resolvable_by
from runs.agents import agent_names
from runs.errors import RunNotFound, RunNotResumable, SealedDataError
from runs.models import (
    Checkpoint,
    Effect,
    EffectStopSwitch,
    EffectTransition,
    IdempotencyKey,
    JournalEntry,
    Leg,
    Run,
    RunMessage,
    Thread,
)
from runs.presenters.outcome import RUN_LIST_PREFETCH, run_list_outcome
from runs.runtime.codec import encode_value
from runs.runtime.usage import total_tokens_of
from runs.secrets.sealing import unseal
from runs.selectors import effect_transition_list
from runs.services.lifecycle import run_cancel, run_requeue
from runs.services.resolution import effect_resolve
from runs.services.stop_switch import effects_release, effects_stop
from runs.stores.sessions import checkpoint_from_row

TOKEN_PREVIEW_LENGTH = 12  # hex digits of the digest
#: What stands for an approval token to a user who may not decide: not even its start.
TOKEN_HIDDEN = "(hidden)"


def token_preview(token: str) -> str:
    """The start of a bearer token's SHA-256 digest (the digest a run's receipt keeps): enough to tell two apart,
    never enough to use one. Not the token's own start: every token opens with the same encoded header."""
    return f"sha256:{hashlib.sha256(token.encode()).hexdigest()[:TOKEN_PREVIEW_LENGTH]}…" if token else "-"


def _redact_tokens(value: Any, *, preview: bool) -> Any:
    """``value`` with every ``token`` entry (approval tokens in pending approvals) replaced by its preview, or
    hidden altogether when ``preview`` is false."""
    if isinstance(value, dict):
        return {
            key: (token_preview(item) if preview else TOKEN_HIDDEN) if key == "token" and isinstance(item, str)
            else _redact_tokens(item, preview=preview)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_redact_tokens(item, preview=preview) for item in value]
    return value


def token_json_displays(description: str, value_of: Callable[[Any], Any]) -> tuple[Callable[..., str], ...]:
    """Two admin displays of a record's JSON ``value_of(record)``, to set as methods: approval tokens shortened
    to their preview (for users who may decide), and hidden (``token_fields`` swaps it in for everyone else).
    ``description``'s ``{}`` says "shortened" or "hidden"; sealed data the server cannot open is said so."""

    def display(*, preview: bool) -> Callable[..., str]:
        @admin.display(description=description.format("shortened" if preview else "hidden"))
        def show(model_admin: admin.ModelAdmin, record: Any) -> str:
            try:
                value = value_of(record)
            except SealedDataError as exc:
                return format_html("<em>{}</em>", str(exc))
            text = json.dumps(_redact_tokens(value, preview=preview), ensure_ascii=False, indent=2)
            return format_html("<pre>{}</pre>", text)

        return show

    return display(preview=True), display(preview=False)


class TokenRedactingAdmin(admin.ModelAdmin):
    """Shows approval tokens' previews only to users who may decide (issue #11: tokens are never shown to anyone
    who cannot decide). ``token_fields`` maps each field that shows a token's preview to the one shown instead to
    everyone else (``None``: the field is left out)."""

    token_fields: dict[str, str | None] = {}

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        fields = super().get_fields(request, obj)
        run = obj if isinstance(obj, Run) or obj is None else getattr(obj, "run", None)
        if approval_is_decidable_by(user=request.user, run=run):  # four eyes: not the tokens of one's own run
            return fields
        swapped = (self.token_fields.get(name, name) for name in fields)
        return [name for name in swapped if name is not None]


class NoWrites:
    """No add, change or delete, for anyone: a mixin of admins and inlines that show records and change none."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin(NoWrites, TokenRedactingAdmin):
    """Shows records and changes none: no add, change or delete, for anyone."""


class ReadOnlyInline(NoWrites, admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True


class LegInline(ReadOnlyInline):
    model = Leg
    fields = readonly_fields = [
        "number", "kind", "owner_epoch", "worker_id", "started_at", "ended_at", "finish_reason", "error",
    ]


class EffectInline(ReadOnlyInline):
    model = Effect
    fields = readonly_fields = [
        "operation_id", "tool_name", "status", "attempts", "owner_epoch", "receipt", "updated_at",
    ]


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = [
        "run_id", "agent", "status", "outcome", "created_by", "thread", "turn", "step_index", "total_tokens",
        "owner_epoch", "worker_id", "created_at",
    ]
    list_filter = ["status", "agent", "cancel_requested"]
    search_fields = ["run_id", "created_by__username", "thread__thread_id", "forked_from__run_id"]
    date_hierarchy = "created_at"
    list_select_related = ["created_by", "cancelled_by", "thread"]
    fields = [
        "run_id", "agent", "thread", "turn", "forked_from", "forked_from_step", "status", "step_index", "usage", "finish_reason", "error", "owner_epoch", "worker_id",
        "lease_expires_at", "cancel_requested", "cancelled_by", "cancelled_at", "cancel_reason", "retry_at",
        "retry_attempt", "retry_limit", "metadata", "created_by", "created_at", "updated_at", "trace_context",
    ]
    inlines = [LegInline, EffectInline]
    actions = ["cancel_selected", "resume_selected"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        return super().get_queryset(request).prefetch_related(*RUN_LIST_PREFETCH)

    @admin.display(description="outcome")
    def outcome(self, run: Run) -> str:
        """What the run came to (a denied payment and a paid one both complete; this tells them apart)."""
        return run_list_outcome(run)[1].label

    @admin.display(description="total tokens")
    def total_tokens(self, run: Run) -> int:
        return total_tokens_of(run.usage)

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """Cancelling and resuming are changes to runs, made by the services on the operator's behalf."""
        return request.user.has_perm("runs.change_run")

    @admin.action(description="Cancel selected runs", permissions=["operate"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._each(request, queryset, partial(run_cancel, user=request.user), "cancelled")

    @admin.action(description="Resume selected runs", permissions=["operate"])
    def resume_selected(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._each(request, queryset, run_requeue, "queued for another leg")

    def _each(self, request: HttpRequest, queryset: QuerySet[Run], service: Any, done: str) -> None:
        succeeded = 0
        for run_id in queryset.values_list("run_id", flat=True):
            try:
                service(run_id=run_id)
            except (RunNotFound, RunNotResumable) as exc:
                self.message_user(request, f"{run_id}: {exc}", messages.ERROR)
            else:
                succeeded += 1
        if succeeded:
            self.message_user(request, f"{succeeded} run(s) {done}.", messages.SUCCESS)


class TurnInline(ReadOnlyInline):
    model = Run
    fk_name = "thread"
    verbose_name, verbose_name_plural = "turn", "turns"
    fields = readonly_fields = ["turn", "run_id", "status", "created_at"]
    ordering = ["turn"]


@admin.register(Thread)
class ThreadAdmin(ReadOnlyAdmin):
    """Conversations, read-only like runs: their turns are runs (runs.services.threads adds them)."""

    list_display = ["thread_id", "agent", "created_by", "created_at", "updated_at"]
    list_filter = ["agent"]
    search_fields = ["thread_id", "created_by__username"]
    date_hierarchy = "updated_at"
    list_select_related = ["created_by"]
    fields = ["thread_id", "agent", "created_by", "metadata", "created_at", "updated_at"]
    inlines = [TurnInline]

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Whoever reads every run reads every thread (support, reviewers), as in the API.
        return request.user.has_perm(VIEW_EVERY_RUN) or super().has_view_permission(request, obj)


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = ["session_key", "step_index", "status", "message_count", "owner_epoch", "recorded_at"]
    list_filter = ["status"]
    search_fields = ["session_key", "run__run_id"]
    list_select_related = ["run"]
    fields = [
        "run", "session_key", "step_index", "status", "usage", "agent_path", "message_count", "owner_epoch",
        "created_at_ms", "recorded_at", "decoded",
    ]
    token_fields = {"decoded": "decoded_without_tokens"}
    decoded, decoded_without_tokens = token_json_displays(
        "checkpoint (decoded; approval tokens {})", lambda checkpoint: encode_value(checkpoint_from_row(checkpoint)))


@admin.register(JournalEntry)
class JournalEntryAdmin(ReadOnlyAdmin):
    list_display = ["run", "seq", "is_sentinel", "part_type", "owner_epoch", "created_at"]
    list_filter = ["is_sentinel"]
    search_fields = ["run__run_id"]
    list_select_related = ["run"]
    fields = ["run", "seq", "is_sentinel", "owner_epoch", "created_at", "part_shown"]
    token_fields = {"part_shown": "part_without_tokens"}

    @admin.display(description="type")
    def part_type(self, entry: JournalEntry) -> str:
        return "end of leg" if entry.is_sentinel else entry.decoded_part.get("type", "-")

    # Approval-request parts carry the bearer token.
    part_shown, part_without_tokens = token_json_displays("part (approval tokens {})",
                                                          lambda entry: entry.decoded_part)


@admin.register(Leg)
class LegAdmin(ReadOnlyAdmin):
    list_display = ["run", "number", "kind", "owner_epoch", "worker_id", "started_at", "ended_at", "finish_reason"]
    list_filter = ["kind", "finish_reason"]
    search_fields = ["run__run_id", "worker_id"]
    list_select_related = ["run"]


@admin.register(Effect)
class EffectAdmin(ReadOnlyAdmin):
    """The ledger. An effect that needs review is resolved here with the same services as the API: retry with
    the same operation id, mark committed with a receipt, or abandon; each asks for the reason on a form."""

    list_display = ["operation_id", "run", "tool_name", "status", "outcome_source", "attempts", "owner_epoch",
                    "updated_at"]
    list_filter = ["status", "tool_name", "outcome_source"]
    search_fields = ["operation_id", "tool_call_id", "run__run_id"]
    list_select_related = ["run"]
    fields = ["run", "operation_id", "tool_call_id", "tool_name", "status", "outcome_source", "fingerprint",
              "request", "receipt", "error", "attempts", "approval", "owner_epoch", "unknown_since", "created_at",
              "updated_at", "ledger"]
    actions = ["resolve_retry", "resolve_commit", "resolve_abandon"]

    @admin.display(description="transitions (oldest first)")
    def ledger(self, effect: Effect) -> str:
        rows = format_html_join(
            "", "<tr><td>{}</td><td>{} &rarr; {}</td><td>{}</td><td>{} {}</td><td>{}</td><td>{}</td></tr>",
            ((t.at, t.from_status or "-", t.to_status, t.owner_epoch, t.actor_kind, t.actor, t.via,
              t.note + (f" {json.dumps(t.evidence, ensure_ascii=False)}" if t.evidence else ""))
             for t in effect_transition_list(effect=effect)),
        )
        return format_html("<table><tr><th>at</th><th>state</th><th>epoch</th><th>who</th><th>via</th>"
                           "<th>note, evidence</th></tr>{}</table>", rows)

    def has_resolve_permission(self, request: HttpRequest) -> bool:
        return effect_is_resolvable_by(user=request.user)

    @admin.action(description="Retry selected effects with the same operation id", permissions=["resolve"])
    def resolve_retry(self, request: HttpRequest, queryset: QuerySet[Effect]) -> Any:
        return self._resolve(request, queryset, "retry")

    @admin.action(description="Mark selected effects committed, with a receipt", permissions=["resolve"])
    def resolve_commit(self, request: HttpRequest, queryset: QuerySet[Effect]) -> Any:
        return self._resolve(request, queryset, "commit")

    @admin.action(description="Abandon selected effects (the run continues with an error result)",
                  permissions=["resolve"])
    def resolve_abandon(self, request: HttpRequest, queryset: QuerySet[Effect]) -> Any:
        return self._resolve(request, queryset, "abandon")

    def _resolve(self, request: HttpRequest, queryset: QuerySet[Effect], action: str) -> Any:
        """Ask for the reason (and the receipt) on a form, then resolve each selected effect."""
        form = EffectResolveForm(request.POST if "apply" in request.POST else None, action=action)
        if not form.is_valid():
            return TemplateResponse(request, "admin/runs/effect/resolve.html", {
                **self.admin_site.each_context(request), "title": f"Resolve effects: {action}", "form": form,
                "effects": queryset.select_related("run"), "action": request.POST.get("action"),
                "opts": self.model._meta,
            })
        done = 0
        for effect in queryset.select_related("run"):
            try:
                effect_resolve(run_id=effect.run.run_id, operation_id=effect.operation_id, action=action,
                               reason=form.cleaned_data["reason"], receipt=form.cleaned_data.get("receipt"),
                               user=request.user)
            except (RunNotFound, RunNotResumable, ValidationError, PermissionDenied) as exc:
                self.message_user(request, f"{effect.operation_id}: {_message_of(exc)}", messages.ERROR)
            else:
                done += 1
        if done:
            self.message_user(request, f"{done} effect(s) resolved: {action}.", messages.SUCCESS)
        return None


class EffectResolveForm(forms.Form):
    """The reason every resolution needs, and the receipt marking an effect committed needs."""

    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000)
    receipt = forms.JSONField(required=False, help_text="A JSON object: the outcome (e.g. the provider's "
                                                        "transaction).")

    def __init__(self, *args: Any, action: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.action = action
        if action != "commit":
            del self.fields["receipt"]

    def clean_receipt(self) -> Any:
        receipt = self.cleaned_data.get("receipt")
        if self.action == "commit" and not isinstance(receipt, dict):
            raise forms.ValidationError("Marking an effect committed needs its receipt, a JSON object.")
        return receipt


def _message_of(exc: Exception) -> str:
    return "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)


@admin.register(EffectTransition)
class EffectTransitionAdmin(ReadOnlyAdmin):
    list_display = ["effect", "from_status", "to_status", "owner_epoch", "actor_kind", "actor", "via", "at"]
    list_filter = ["to_status", "actor_kind", "via"]
    search_fields = ["effect__operation_id", "actor"]
    list_select_related = ["effect"]


class EffectStopSwitchForm(forms.ModelForm):
    """A switch to turn on: blank agent for every agent, else a registered agent's name."""

    class Meta:
        model = EffectStopSwitch
        fields = ["agent", "reason"]

    def clean_agent(self) -> str:
        agent = self.cleaned_data.get("agent", "")
        if agent and agent not in agent_names():
            raise forms.ValidationError(f"No agent named {agent!r}; known: {', '.join(agent_names())}.")
        return agent

    def validate_unique(self) -> None:
        """Stopping a switch that exists (released) turns it on again; it is not a duplicate."""


@admin.register(EffectStopSwitch)
class EffectStopSwitchAdmin(admin.ModelAdmin):
    """The stop switches: adding one (blank agent: every agent) stops new effects; the actions stop or release
    the selected ones. Changes go through runs.services.stop_switch, which queues the runs a release lets go on."""

    list_display = ["scope", "is_on", "reason", "changed_by", "changed_at"]
    list_filter = ["is_on"]
    form = EffectStopSwitchForm
    actions = ["stop_selected", "release_selected"]

    @admin.display(description="agent")
    def scope(self, switch: EffectStopSwitch) -> str:
        return switch.agent or "every agent"

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("runs.add_effectstopswitch")

    def save_model(self, request: HttpRequest, obj: EffectStopSwitch, form: Any, change: bool) -> None:
        switch = effects_stop(agent=obj.agent or None, reason=obj.reason, user=request.user)
        obj.pk = switch.pk

    def save_form(self, request: HttpRequest, form: Any, change: bool) -> EffectStopSwitch:
        return form.save(commit=False)

    @admin.action(description="Stop new effects (selected switches)", permissions=["operate"])
    def stop_selected(self, request: HttpRequest, queryset: QuerySet[EffectStopSwitch]) -> None:
        for switch in queryset:
            effects_stop(agent=switch.agent or None, reason=switch.reason, user=request.user)
        self.message_user(request, "New effects are stopped for the selected scope(s).", messages.SUCCESS)

    @admin.action(description="Release selected switches (held runs continue)", permissions=["operate"])
    def release_selected(self, request: HttpRequest, queryset: QuerySet[EffectStopSwitch]) -> None:
        queued = sum(effects_release(agent=switch.agent or None, user=request.user) for switch in queryset)
        self.message_user(request, f"Released; {queued} held run(s) queued to continue.", messages.SUCCESS)


@admin.register(RunMessage)
class RunMessageAdmin(ReadOnlyAdmin):
    list_display = ["session_key", "position", "run", "size"]
    search_fields = ["session_key", "run__run_id"]
    list_select_related = ["run"]
    # ``data`` holds sealed message bytes: only their decoded length is shown, never the bytes.
    fields = ["run", "session_key", "parent", "position", "size"]

    @admin.display(description="decoded size")
    def size(self, message: RunMessage) -> str:
        try:
            return f"{len(unseal(message.data))} bytes"
        except SealedDataError:
            return "sealed (no key opens it)"


@admin.register(IdempotencyKey)
class IdempotencyKeyAdmin(ReadOnlyAdmin):
    list_display = ["key", "user", "scope", "status_code", "created_at", "expires_at"]
    list_filter = ["scope", "status_code"]
    search_fields = ["key", "user__username"]
    list_select_related = ["user"]
    fields = ["key", "user", "scope", "fingerprint", "status_code", "answer", "created_at", "expires_at"]
