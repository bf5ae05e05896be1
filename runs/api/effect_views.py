"""The effect ledger's API: a person resolves an effect that needs review, and the ledger's measures.

  POST /api/runs/{run_id}/effects/{operation_id}/resolve/   {"action": "retry" | "commit" | "abandon",
                                                            "receipt"?: {...}, "reason": "..."}  (reviewers)
  GET  /api/metrics/                                        the ledger's measures (support and reviewers)
  POST /api/effects/stop/                                   the stop switch: {"agent"?, "release"?, "reason"?}

Its serializers live here, beside the views that use them. Domain errors become HTTP answers in
runs.api.error_handler: an unknown run or effect is a 404, an effect that does not need review a 409.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from runs.access import RESOLVE_EFFECTS, VIEW_EVERY_RUN, effect_is_resolvable_by
from runs.api.generic import validated_input
from runs.api.inputs import path_operation_id, path_run_id
from runs.api.schema import UNAUTHENTICATED, WWW_AUTHENTICATE, error_answer
from runs.services.resolution import RESOLVE_ACTIONS, effect_resolve
from runs.models import Effect, EffectTransition
from runs.presenters.metrics import effect_metrics
from runs.services.stop_switch import effects_release, effects_stop

__all__ = ["EffectResolveApi", "EffectStopApi", "MetricsApi"]

_TOO_LARGE = error_answer("The body is larger than 1 MiB.")
_NOT_JSON = error_answer("The body is not application/json.")

#: Who may flip a stop switch (the admin's add permission on switches; superusers have it).
STOP_EFFECTS = "runs.add_effectstopswitch"


class EffectResolveInputSerializer(serializers.Serializer):
    """A person's resolution of an effect that needs review."""

    action = serializers.ChoiceField(
        choices=RESOLVE_ACTIONS,
        help_text="retry: attempt again with the same operation id; commit: it happened, here is its receipt; "
        "abandon: the run goes on with an is_error result saying so.",
    )
    receipt = serializers.DictField(required=False, help_text="The outcome, for commit (e.g. the provider's "
                                                               "transaction).")
    reason = serializers.CharField(max_length=2000, help_text="Why: kept with the resolution.")

    def validate(self, data):
        if data["action"] == "commit" and "receipt" not in data:
            raise serializers.ValidationError({"receipt": ["Marking an effect committed needs its receipt."]})
        return data


class EffectTransitionSerializer(serializers.ModelSerializer):
    class Meta:
        model = EffectTransition
        fields = ["from_status", "to_status", "owner_epoch", "actor_kind", "actor", "via", "note", "evidence", "at"]
        read_only_fields = fields


class EffectLedgerEntrySerializer(serializers.ModelSerializer):
    """One operation of the ledger with its evidence: every transition, oldest first."""

    transitions = serializers.SerializerMethodField()

    class Meta:
        model = Effect
        fields = ["operation_id", "tool_call_id", "tool_name", "status", "fingerprint", "request", "receipt",
                  "outcome_source", "error", "attempts", "approval", "owner_epoch", "unknown_since", "created_at",
                  "updated_at", "transitions"]
        read_only_fields = fields

    def get_transitions(self, effect: Effect) -> list[dict]:
        return EffectTransitionSerializer(effect.transitions.order_by("id"), many=True).data


class RecoveryTimeSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    mean = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)


class StopSwitchSerializer(serializers.Serializer):
    agent = serializers.CharField(allow_null=True, help_text="null: every agent.")
    reason = serializers.CharField(allow_blank=True)
    since = serializers.DateTimeField()
    by = serializers.CharField(allow_null=True)


class EffectMetricsSerializer(serializers.Serializer):
    """The ledger's measures (runs.presenters.metrics)."""

    duplicate_effects = serializers.IntegerField()
    oldest_unknown_outcome_seconds = serializers.FloatField(allow_null=True)
    unknown_outcomes = serializers.IntegerField()
    recovery_completion_seconds = RecoveryTimeSerializer(
        help_text="For each recovery leg (a new owner continuing a run whose worker died), from the dead leg's last "
                  "journal part or checkpoint to the recovery leg's first checkpoint or its end; recoveries still "
                  "under way are not counted yet (the latest 1000).")
    reconciliation_completion_seconds = RecoveryTimeSerializer(
        help_text="For each effect whose outcome was established by reconciliation or a person, from its first "
                  "attempt to that outcome (the latest 1000).")
    expired_approvals = serializers.IntegerField()
    manual_reconciliations = serializers.IntegerField()
    cross_run_replays = serializers.IntegerField(
        help_text="Business operations one run performed and another run was given the recorded result of, "
                  "instead of performing them again.")
    effects_by_status = serializers.DictField(child=serializers.IntegerField())
    effects_stopped = StopSwitchSerializer(many=True)


class EffectStopInputSerializer(serializers.Serializer):
    agent = serializers.CharField(required=False, max_length=100, help_text="Only this agent (default: every agent).")
    release = serializers.BooleanField(default=False, help_text="Release the switch: held runs continue.")
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


class EffectStopResultSerializer(serializers.Serializer):
    effects_stopped = StopSwitchSerializer(many=True)
    queued = serializers.IntegerField(help_text="Held runs queued to continue (a release).")


class CanStopEffects(BasePermission):
    message = f"Flipping the stop switch needs {STOP_EFFECTS}."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return request.user.has_perm(STOP_EFFECTS)


class CanResolveEffects(BasePermission):
    """Reviewers only: the permission the reviewers group holds."""

    message = f"Resolving effects needs the reviewer permission ({RESOLVE_EFFECTS})."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return effect_is_resolvable_by(user=request.user)


class CanReadEveryRun(BasePermission):
    message = f"The ledger's measures cover every run: they need {VIEW_EVERY_RUN} (support, reviewers)."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return request.user.has_perm(VIEW_EVERY_RUN)


class EffectResolveApi(APIView):
    permission_classes = [IsAuthenticated, CanResolveEffects]

    @extend_schema(
        operation_id="runs_effects_resolve",
        summary="Resolve an effect that needs review",
        description="Retry it with the same operation id, mark it committed with a receipt, or abandon it (the run "
        "continues with an is_error result saying so). Recorded with who, when and why; the run is queued again "
        "once none of its effects needs review.",
        request=EffectResolveInputSerializer,
        parameters=[WWW_AUTHENTICATE],
        responses={
            200: EffectLedgerEntrySerializer,
            400: error_answer("Field errors: an unknown action, no reason, a commit without a receipt."),
            401: UNAUTHENTICATED,
            403: error_answer("Not a reviewer, or a signed-in browser session that did not send its CSRF token."),
            404: error_answer("No such run, or no such effect in it."),
            409: error_answer("The effect does not need review, or its run is queued or running."),
            413: _TOO_LARGE,
            415: _NOT_JSON,
        },
    )
    def post(self, request: Request, run_id: str, operation_id: str) -> Response:
        run_id, operation_id = path_run_id(run_id), path_operation_id(run_id, operation_id)
        resolution = validated_input(EffectResolveInputSerializer, request.data)
        effect = effect_resolve(run_id=run_id, operation_id=operation_id, user=request.user, **resolution)
        return Response(EffectLedgerEntrySerializer(effect).data)


class MetricsApi(APIView):
    permission_classes = [IsAuthenticated, CanReadEveryRun]

    @extend_schema(
        operation_id="metrics_retrieve",
        summary="The effect ledger's measures",
        description="Duplicate effects, the age of the oldest unknown outcome, recovery completion time, expired "
        "approvals, manual reconciliations; with the effects in each state and the stop switches that are on.",
        parameters=[WWW_AUTHENTICATE],
        responses={200: EffectMetricsSerializer, 401: UNAUTHENTICATED, 403: error_answer("Not support or a reviewer.")},
    )
    def get(self, request: Request) -> Response:
        return Response(EffectMetricsSerializer(effect_metrics()).data)


class EffectStopApi(APIView):
    permission_classes = [IsAuthenticated, CanStopEffects]

    @extend_schema(
        operation_id="effects_stop",
        summary="Stop new effects, or release the stop",
        description="While a switch is on (every agent, or one), no new effect is attempted: a run that reaches one "
        "suspends with \"effects are stopped\"; reads and reconciliation go on. Released, held runs continue.",
        request=EffectStopInputSerializer,
        parameters=[WWW_AUTHENTICATE],
        responses={
            200: EffectStopResultSerializer,
            400: error_answer("Field errors, or an unknown agent."),
            401: UNAUTHENTICATED,
            403: error_answer("Not allowed to flip the switch, or a signed-in browser session that did not send its "
                              "CSRF token."),
            413: _TOO_LARGE,
            415: _NOT_JSON,
        },
    )
    def post(self, request: Request) -> Response:
        data = validated_input(EffectStopInputSerializer, request.data)
        queued = 0
        if data["release"]:
            queued = effects_release(agent=data.get("agent"), user=request.user)
        else:
            effects_stop(agent=data.get("agent"), reason=data["reason"], user=request.user)
        switches = effect_metrics()["effects_stopped"]
        return Response(EffectStopResultSerializer({"effects_stopped": switches, "queued": queued}).data)
