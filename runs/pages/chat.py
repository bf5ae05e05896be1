"""The chat pages: /chat/ (the user's threads, and a new chat with any agent) and /chat/{thread_id}/ (every turn, a
message box, the answer streaming live through runs/static/deuz/chat.js, approvals inline with the user's own
Approve / Deny when the agent lets its creator decide).

Roles are those of threads (runs.access): the creator reads and writes a thread; support and reviewers read every
thread; anyone else is told it does not exist (404). Deciding a request follows approvals.roles; a user who may read
the thread but not decide gets 403.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Prefetch
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from approvals.errors import ApprovalNotDecidable, ApprovalNotFound, ApprovalTokenInvalid
from approvals.roles import approval_refusal
from approvals.selectors import approval_get
from approvals.services import approval_decide
from runs.access import thread_is_readable_by, thread_is_writable_by
from runs.agents import agent_approvals_decided_by
from runs.errors import ThreadNotFound, ThreadTurnActive, UnknownAgent
from runs.models import Run, Thread
from runs.pages.chat_forms import ChatMessageForm, ChatStartForm, ChatVerdictForm
from runs.pages.views import _not_found_page
from runs.presenters.outcome import run_first_request
from runs.presenters.conversation import thread_chat_turns, thread_title, turn_approvals, turn_verdicts
from runs.selectors import thread_get, thread_list
from runs.services.threads import thread_message_add, thread_start

__all__ = ["chat_decide", "chat_detail", "chat_example", "chat_list"]

THREADS_PER_PAGE = 30


def _readable_thread(request: HttpRequest, thread_id: str) -> Thread:
    """The thread, when the user may read it; 404 otherwise, the same answer as for a thread that does not exist."""
    try:
        thread = thread_get(thread_id=thread_id)
    except ThreadNotFound:
        raise Http404(f"No thread {thread_id!r}.") from None
    if not thread_is_readable_by(thread, user=request.user):
        raise Http404(f"No thread {thread_id!r}.")
    return thread


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def chat_list(request: HttpRequest) -> HttpResponse:
    """The user's own threads, latest activity first; POST starts a thread with its first message."""
    form = ChatStartForm(request.POST if request.method == "POST" else None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                with transaction.atomic():  # a thread is never left without its first turn
                    thread = thread_start(agent=form.cleaned_data["agent"], user=request.user)
                    thread_message_add(thread_id=thread.thread_id, content=form.cleaned_data["content"],
                                       user=request.user)
            except UnknownAgent:
                form.add_error("agent", "That agent is no longer registered.")
            else:
                return redirect("chat-detail", thread.thread_id)
        status = 400
    threads = (thread_list().filter(created_by_id=request.user.pk)
               .prefetch_related(Prefetch("turns", queryset=Run.objects.order_by("turn"))))
    page = Paginator(threads, THREADS_PER_PAGE).get_page(request.GET.get("page"))
    rows = []
    for thread in page.object_list:
        turns = list(thread.turns.all())
        rows.append({"thread": thread, "turns": len(turns), "latest": turns[-1] if turns else None,
                     "title": run_first_request(turns[0]) if turns else ""})
    return render(request, "runs/chat_list.html", {"form": form, "rows": rows, "page": page}, status=status)


@login_required
@require_http_methods(["GET", "HEAD"])
def chat_example(request: HttpRequest) -> HttpResponse:
    """The AI SDK example (/examples/ai-sdk-chat/): a chat the `ai` package's own Chat and DefaultChatTransport drive in
    the browser against /api/chat (runs/static/deuz/examples/ai-sdk-chat.js). Same origin, so the session cookie and
    the CSRF token (a meta tag) authenticate it; any signed-in user may chat with the agents they may start."""
    return render(request, "runs/chat_example.html", {"agents": ChatStartForm().agents})


@login_required
@_not_found_page
@require_http_methods(["GET", "HEAD", "POST"])
def chat_detail(request: HttpRequest, thread_id: str) -> HttpResponse:
    """Every turn of the thread and a message box; POST adds the next turn (its creator only: 403 for a reader)."""
    thread = _readable_thread(request, thread_id)
    form = ChatMessageForm(request.POST if request.method == "POST" else None)
    status = 200
    if request.method == "POST":
        if not thread_is_writable_by(thread, user=request.user):
            raise PermissionDenied("Only the thread's creator writes in it.")
        status = 400
        if form.is_valid():
            try:
                thread_message_add(thread_id=thread.thread_id, content=form.cleaned_data["content"],
                                   user=request.user)
            except ThreadTurnActive as exc:
                messages.error(request, f"The agent is still on its turn ({exc.active_run_id} is {exc.status}): "
                                        "send your message once it has answered.")
                status = 409
            else:
                return redirect("chat-detail", thread.thread_id)
    return render(request, "runs/chat_detail.html", _detail_context(request, thread, form), status=status)


def _detail_context(request: HttpRequest, thread: Thread, form: ChatMessageForm) -> dict[str, Any]:
    turns = thread_chat_turns(thread=thread)
    latest = turns[-1] if turns else None
    approvals = [] if latest is None else turn_approvals(run=latest.run, user=request.user)
    return {
        "thread": thread, "turns": turns, "latest": latest, "form": form,
        "title": thread_title(thread, turns),
        "approvals": approvals,
        "waiting_for": "" if not approvals else ("you" if any(a.is_decidable for a in approvals) else "reviewer"),
        "verdicts": [] if latest is None else turn_verdicts(run=latest.run),
        "decided_by": agent_approvals_decided_by(thread.agent),
        "may_write": thread_is_writable_by(thread, user=request.user),
        "is_active": latest is not None and latest.is_active,
    }


@login_required
@_not_found_page
@require_POST
def chat_decide(request: HttpRequest, thread_id: str, run_id: str, approval_id: str) -> HttpResponse:
    """Approve or deny a request of one of the thread's turns as the signed-in user, with the token stored with it
    (the browser never holds one); 403 for a user who may read the thread but not decide the request."""
    thread = _readable_thread(request, thread_id)
    try:
        row = approval_get(run_id=run_id, approval_id=approval_id)
    except ApprovalNotFound:
        raise Http404("No such request in this thread.") from None
    if row.run.thread_id != thread.pk:
        raise Http404("No such request in this thread.")
    refusal = approval_refusal(user=request.user, run=row.run)
    if refusal is not None:
        raise PermissionDenied(refusal)
    form = ChatVerdictForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose Approve or Deny.")
        return redirect("chat-detail", thread.thread_id)
    approved = form.cleaned_data["verdict"] == "approve"
    try:
        approval_decide(run_id=run_id, approval_id=approval_id, approved=approved, token=row.token,
                        reason=form.cleaned_data["reason"], user=request.user)
    except (ApprovalNotDecidable, ApprovalTokenInvalid, ApprovalNotFound):
        row = approval_get(run_id=run_id, approval_id=approval_id)
        messages.error(request, f"{row.tool_name} was not {'approved' if approved else 'denied'}: the request was "
                                f"closed first ({row.get_status_display().lower()}).")
    else:
        messages.success(request, f"{row.tool_name} {'approved' if approved else 'denied'}: the agent goes on.")
    return redirect("chat-detail", thread.thread_id)
