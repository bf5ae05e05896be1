"""Approval requests and verdicts: minting, signing, and settling a verdict with its token checks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .deps import Deps
from .effects import effect_fingerprint
from .types import ToolApprovalRequest

__all__ = [
    "APPROVAL_TOKEN_DENIAL_REASON",
    "DENIED_BY_DEFAULT_REASON",
    "DENIED_REASON",
    "EDIT_REVISION",
    "Verdict",
    "mint_request",
    "settle_verdict",
    "sign_edit",
]

APPROVAL_TOKEN_DENIAL_REASON = "Approval token missing, invalid, expired, or bound to another run."
DENIED_REASON = "The tool call was denied."
DENIED_BY_DEFAULT_REASON = "No verdict was given for this tool call; it was denied by default."
#: The revision an edited request is of its approval: the request the model made is the first.
EDIT_REVISION = 2


@dataclass(frozen=True)
class Verdict:
    approved: bool
    reason: str | None = None
    payload: Mapping[str, Any] | None = None  # the verified token's payload: the exact request approved
    edit: Mapping[str, Any] | None = None  # {"input", "by"}: the server-signed input a person approved instead


def mint_request(
    *,
    call: Mapping[str, Any],
    agent_path: tuple[str, ...],
    deps: Deps,
    signer: Any,
    binding_run_id: str | None,
    operation_id: str | None = None,
) -> ToolApprovalRequest:
    """A new approval request for a gated call, signed when a signer is given (best effort). ``operation_id``
    names the business operation the call would perform, when its tool has one (signed with the rest)."""
    request: ToolApprovalRequest = {
        "approval_id": deps.generate_id(),
        "tool_call_id": call["tool_call_id"],
        "tool_name": call["tool_name"],
        "input": call["input"],
    }
    if agent_path:
        request["agent_path"] = list(agent_path)
    if operation_id is not None:
        request["operation_id"] = operation_id
    if signer is not None:
        try:
            request["token"] = signer.sign(request, run_id=binding_run_id)
        except Exception as exc:  # signing must never kill a run; unsigned requests are denied on resume
            deps.logger.error(
                "Signing approval %s for tool %s failed (%s); the request goes out unsigned and will be denied.",
                request["approval_id"],
                request["tool_name"],
                type(exc).__name__,
            )
    return request


def sign_edit(
    request: Mapping[str, Any], *, edited_input: Mapping[str, Any], edited_by: str | None, signer: Any,
    run_id: str | None,
) -> str:
    """The server's token for an edited request: the next revision of ``request`` (EDIT_REVISION), with the input a
    person approved instead and who, bound to the original by its fingerprint. Only such a token makes a verdict
    run other arguments than the model's (settle_verdict); an unsigned edit is denied."""
    edited: dict[str, Any] = {
        "approval_id": request["approval_id"],
        "tool_call_id": request["tool_call_id"],
        "tool_name": request["tool_name"],
        "input": dict(edited_input),
        "revision": EDIT_REVISION,
        "edited_by": edited_by,
        "original_fingerprint": effect_fingerprint(request["tool_name"], request.get("input")),
    }
    if request.get("agent_path"):
        edited["agent_path"] = list(request["agent_path"])
    return signer.sign(edited, run_id=run_id)


def find_response(
    responses: Iterable[Mapping[str, Any]], *, approval_id: str | None, tool_call_id: str
) -> Mapping[str, Any] | None:
    """The verdict for a call: by ``approval_id`` when the request is known, else by ``tool_call_id``."""
    for response in responses:
        if approval_id is not None and response.get("approval_id") == approval_id:
            return response
    if approval_id is None:
        for response in responses:
            if response.get("tool_call_id") == tool_call_id:
                return response
    return None


def settle_verdict(
    response: Mapping[str, Any] | None,
    *,
    approval_id: str | None,
    tool_call_id: str,
    signer: Any,
    max_age_ms: int | None,
    binding_run_id: str | None,
    tool_name: str | None = None,
    tool_input: Mapping[str, Any] | None = None,
) -> Verdict:
    """Approved only if the response approves and, with a signer, its token passes the four checks; given the
    call's ``tool_name`` and ``tool_input``, the token must also have been signed for that exact request (its
    fingerprint), so a verdict cannot authorize other arguments. An edit (``edit_token``, ``edited_input``) is
    honoured only as the server signed it (_settle_edit); without a signer, an edit is denied."""
    if response is None:
        return Verdict(False, DENIED_BY_DEFAULT_REASON)
    if response.get("approved") is not True:
        reason = response.get("reason")
        return Verdict(False, reason if isinstance(reason, str) and reason else DENIED_REASON)
    if signer is None:
        if "edit_token" in response or "edited_input" in response:
            return Verdict(False, APPROVAL_TOKEN_DENIAL_REASON)  # nothing can vouch for an edit
        return Verdict(True)
    payload = signer.verify(response.get("token"), max_age_ms=max_age_ms)
    if payload is None:
        return Verdict(False, APPROVAL_TOKEN_DENIAL_REASON)
    if approval_id is not None and payload.get("approval_id") != approval_id:
        return Verdict(False, APPROVAL_TOKEN_DENIAL_REASON)
    if payload.get("tool_call_id") != tool_call_id:
        return Verdict(False, APPROVAL_TOKEN_DENIAL_REASON)
    token_run_id = payload.get("run_id")
    if binding_run_id is not None and token_run_id is not None and token_run_id != binding_run_id:
        return Verdict(False, APPROVAL_TOKEN_DENIAL_REASON)
    if tool_name is not None and (
        payload.get("tool_name") != tool_name
        or effect_fingerprint(tool_name, payload.get("input")) != effect_fingerprint(tool_name, tool_input)
    ):
        return Verdict(False, APPROVAL_TOKEN_DENIAL_REASON)
    if "edit_token" in response or "edited_input" in response:
        return _settle_edit(response, payload, signer=signer, max_age_ms=max_age_ms, binding_run_id=binding_run_id,
                            tool_input=tool_input)
    return Verdict(True, payload=payload)


def _settle_edit(
    response: Mapping[str, Any],
    original: Mapping[str, Any],
    *,
    signer: Any,
    max_age_ms: int | None,
    binding_run_id: str | None,
    tool_input: Mapping[str, Any] | None,
) -> Verdict:
    """An approval with an edit (the original token verified already): approved with the edited input only when
    ``edit_token`` is the server's signature of the next revision of this very request (sign_edit), and an
    ``edited_input`` sent beside it is the one it signed; anything else authorizes nothing."""
    denied = Verdict(False, APPROVAL_TOKEN_DENIAL_REASON)
    edit = signer.verify(response.get("edit_token"), max_age_ms=max_age_ms)
    tool_name = original.get("tool_name")
    if edit is None or edit.get("revision") != EDIT_REVISION or not isinstance(edit.get("input"), dict):
        return denied
    if any(edit.get(key) != original.get(key) for key in ("approval_id", "tool_call_id", "tool_name")):
        return denied
    token_run_id = edit.get("run_id")
    if binding_run_id is not None and token_run_id is not None and token_run_id != binding_run_id:
        return denied
    if edit.get("original_fingerprint") != effect_fingerprint(tool_name, tool_input if tool_input is not None
                                                               else original.get("input")):
        return denied
    sent = response.get("edited_input")
    if sent is not None and effect_fingerprint(tool_name, sent) != effect_fingerprint(tool_name, edit["input"]):
        return denied
    by = edit.get("edited_by")
    return Verdict(True, payload=edit, edit={"input": edit["input"], "by": by if isinstance(by, str) else None})
