"""The site's own sign-in for every role (Django's auth views), sending each person where their work is."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.urls import reverse

from approvals.roles import approval_is_decidable_by
from runs.access import VIEW_EVERY_RUN

__all__ = ["SignInView", "home_url_for"]


def home_url_for(user: Any) -> str:
    """Where ``user``'s work is: reviewers the console, support staff and API users the runs, bare staff the admin."""
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
