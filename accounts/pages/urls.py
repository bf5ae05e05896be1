"""Routes of the account pages: the site's sign-in for every role under /accounts/ (LOGIN_URL;
templates/registration/ holds its pages) and the user's account (/account/: which emails they get) and API tokens (/account/tokens/)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from accounts.pages import views

urlpatterns = [
    path("accounts/login/", views.SignInView.as_view(), name="login"),
    path("accounts/logout/", views.SignOutView.as_view(), name="logout"),
    path("accounts/password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password_change/done/", auth_views.PasswordChangeDoneView.as_view(),
         name="password_change_done"),
    path("account/", views.account_page, name="account"),
    path("account/tokens/", views.token_page, name="account-tokens"),
    path("account/tokens/<int:token_id>/revoke/", views.token_revoke_page, name="account-token-revoke"),
]
