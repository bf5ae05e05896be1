"""The account pages: the site's sign-in for every role (Django's auth views, sending each person where their work
is), /account/, where a signed-in user turns the emails about approval requests on or off, and /account/tokens/, where a signed-in user makes, lists and revokes their own API tokens.

A new token's key is shown in the answer to the form that made it, and never again: it is not put in the session
or a message (both are stored), and the page is never cached (deuz_project.middleware.PrivateNoStoreMiddleware).
A token that is not the user's answers 404, as an unknown one.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from accounts.errors import TokenNotFound
from accounts.pages.forms import EmailPreferenceForm, TokenCreateForm
from accounts.selectors import token_get, token_list
from accounts.services import token_create, token_revoke
from approvals.roles import approval_is_decidable_by
from notifications.selectors import email_preference_get
from notifications.services import email_preference_set
from runs.access import VIEW_EVERY_RUN

__all__ = ["SignInView", "SignOutView", "account_page", "home_url_for", "token_page", "token_revoke_page"]


def home_url_for(user: Any) -> str:
    """Where ``user``'s work is (the README's demo logins): superusers the admin, reviewers the console, support
    staff and API users the runs, bare staff the admin."""
    if user.is_superuser:  # may decide too, but the admin is where everything else is (issue 24)
        return reverse("admin:index")
    if approval_is_decidable_by(user=user):
        return reverse("console:queue")
    if user.has_perm(VIEW_EVERY_RUN) or not user.is_staff:
        return reverse("run-list")
    return reverse("admin:index")


class SignInView(auth_views.LoginView):
    """Django's login view; without a ``next`` it sends each role to its own page rather than LOGIN_REDIRECT_URL."""

    # A signed-in visitor sees the form too: a 403 page links here to sign in as someone else.
    redirect_authenticated_user = False

    def get_default_redirect_url(self) -> str:
        return home_url_for(self.request.user)


class SignOutView(auth_views.LogoutView):
    """Django's logout view, which signs out on POST only (a link or an image on another site must not sign anyone
    out); a GET, a bookmarked /accounts/logout/ say, shows a page with the sign-out button instead of a bare 405."""

    http_method_names = ["get", "head", "post", "options"]

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return render(request, "registration/sign_out.html")


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def account_page(request: HttpRequest) -> HttpResponse:
    """The user's account: who they are, and whether they are emailed the approval requests they may decide; a
    POST saves that choice."""
    if request.method == "POST":
        form = EmailPreferenceForm(request.POST)
        if form.is_valid():
            email_preference_set(user=request.user, review_requests=form.cleaned_data["review_requests"])
            state = "on" if form.cleaned_data["review_requests"] else "off"
            messages.success(request, f"Emails about approval requests are {state}.")
            return redirect("account")
    else:
        form = EmailPreferenceForm(initial={
            "review_requests": email_preference_get(user=request.user).review_requests})
    return render(request, "accounts/account.html", {
        "form": form, "may_decide": approval_is_decidable_by(user=request.user),
        "emails_on": settings.DEUZ_REVIEW_EMAILS,
    })


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def token_page(request: HttpRequest) -> HttpResponse:
    """The user's tokens and a form to make one; a POST makes it and shows its key, once."""
    form = TokenCreateForm(request.POST if request.method == "POST" else None)
    issued = None
    if form.is_bound and form.is_valid():
        issued = token_create(user=request.user, **form.cleaned_data)
        form = TokenCreateForm()
    context = {"form": form, "issued": issued, "tokens": token_list(user=request.user)}
    return render(request, "accounts/tokens.html", context, status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def token_revoke_page(request: HttpRequest, token_id: int) -> HttpResponse:
    """GET asks to confirm; POST revokes the token and goes back to the list, saying so."""
    if request.method != "POST":
        token = token_get(user=request.user, token_id=token_id)
        if token is None:
            raise Http404("You have no such token.")
        return render(request, "accounts/token_revoke.html", {"token": token})
    try:
        token = token_revoke(user=request.user, token_id=token_id)
    except TokenNotFound:
        raise Http404("You have no such token.") from None
    messages.success(request, f"Token “{token.name}” ({token.prefix}…) is revoked: it no longer works.")
    return redirect("account-tokens")
