"""The data of each event, rendered by the runs API's own serializers, so a webhook says what GET says: the run's
JSON as its owner reads it (approval tokens never: a token is a bearer credential for a verdict), an approval
request as the verdict endpoint answers it, an effect as the run lists it."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.utils.encoders import JSONEncoder

from approvals.models import ApprovalRequest
from runs.api.outputs import SHOW_TOKENS, ApprovalRequestSerializer, EffectSerializer, RunDetailSerializer
from runs.api.views import _run_detail
from runs.models import Effect, Run
from runs.selectors import run_effect_list

__all__ = ["approval_data", "effect_data", "run_data"]


def _plain(data: Any) -> Any:
    """A serializer's output as plain JSON values (dates as the API writes them)."""
    return json.loads(json.dumps(data, cls=JSONEncoder))


def run_data(run: Run) -> dict[str, Any]:
    """``data`` of run.*: the run's detail, as GET /api/runs/{run_id}/ answers a reader who may not decide."""
    return _plain(RunDetailSerializer(_run_detail(run), context={SHOW_TOKENS: False}).data)


def approval_data(request: ApprovalRequest) -> dict[str, Any]:
    """``data`` of approval.*: ``{"run_id", "approval"}``."""
    return {"run_id": request.run.run_id, "approval": _plain(ApprovalRequestSerializer(request).data)}


def effect_data(effect: Effect) -> dict[str, Any]:
    """``data`` of effect.*: ``{"run_id", "effect"}``, the effect as the run's ``effects`` lists it."""
    entry = next(item for item in run_effect_list(run=effect.run) if item["operation_id"] == effect.operation_id)
    return {"run_id": effect.run.run_id, "effect": _plain(EffectSerializer(entry).data)}
