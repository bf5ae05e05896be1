"""The run page's controls for an effect that needs review: a reviewer retries it, marks it committed with a
receipt, or abandons it, from a plain form (templates/runs/_effect_resolve.html) calling runs.stores.ledger'
service, then back to the run's page with what happened."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from runs.access import effect_is_resolvable_by
from runs.stores.ledger import effect_resolve
from runs.errors import EffectNotFound, RunNotFound, RunNotResumable

__all__ = ["effect_resolve_submit"]


@login_required
@require_POST
def effect_resolve_submit(request: HttpRequest, run_id: str, operation_id: str) -> HttpResponse:
    """Resolve one effect as the signed-in reviewer; any refusal is shown on the run's page, never a 500."""
    if not effect_is_resolvable_by(user=request.user):
        raise PermissionDenied("Resolving effects needs the reviewer permission.")
    receipt, text = None, request.POST.get("receipt", "").strip()
    try:
        if text:
            try:
                receipt = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValidationError({"receipt": [f"The receipt is not JSON: {exc.msg}."]}) from None
        effect = effect_resolve(run_id=run_id, operation_id=operation_id, action=request.POST.get("action", ""),
                                reason=request.POST.get("reason", ""), receipt=receipt, user=request.user)
    except EffectNotFound:
        raise Http404("No such effect.") from None
    except RunNotFound:
        raise Http404("No such run.") from None
    except (ValidationError, RunNotResumable) as exc:
        messages.error(request, "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc))
    else:
        messages.success(request, f"{effect.tool_name} {effect.operation_id}: resolved, now "
                                  f"{effect.get_status_display().lower()}.")
    return redirect("run-detail", run_id=run_id)
