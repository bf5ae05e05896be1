"""EMAIL_URL as dj-email-url reads it (smtp://..., console:, file:///dir) into Django's default mailer, the console
back end when it is unset with DEBUG on and no email at all with DEBUG off; DEUZ_PUBLIC_URL's development default.
Each case imports the settings in a fresh interpreter."""

from __future__ import annotations

import json

from tests.environment import PRODUCTION_ENV

SHOW_EMAIL = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps({"MAILERS": settings.MAILERS, "DEUZ_REVIEW_EMAILS": settings.DEUZ_REVIEW_EMAILS,
                  "DEUZ_PUBLIC_URL": settings.DEUZ_PUBLIC_URL}))
"""


def email_settings(run_python, **env: str) -> dict:
    result = run_python(SHOW_EMAIL, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_unset_with_debug_on_prints_emails_on_the_console_and_links_to_the_local_server(run_python):
    shown = email_settings(run_python)
    assert shown["MAILERS"]["default"]["BACKEND"] == "django.core.mail.backends.console.EmailBackend"
    assert shown["DEUZ_REVIEW_EMAILS"] is True
    assert shown["DEUZ_PUBLIC_URL"] == "http://127.0.0.1:8000"


def test_unset_with_debug_off_sends_no_email(run_python):
    shown = email_settings(run_python, **PRODUCTION_ENV)
    assert shown["MAILERS"] == {} and shown["DEUZ_REVIEW_EMAILS"] is False
    assert shown["DEUZ_PUBLIC_URL"] is None


def test_an_smtp_url_sets_the_mail_server_its_login_and_tls(run_python):
    shown = email_settings(run_python, EMAIL_URL="smtp://deuz:p%40ss@mail.example.com:587/?tls=True")
    assert shown["MAILERS"]["default"] == {"BACKEND": "django.core.mail.backends.smtp.EmailBackend", "OPTIONS": {
        "host": "mail.example.com", "port": 587, "username": "deuz", "password": "p@ss", "use_tls": True,
        "use_ssl": False, "timeout": 10}}


def test_a_file_url_names_an_absolute_folder(run_python):
    shown = email_settings(run_python, EMAIL_URL="file:///var/tmp/deuz-mail")
    assert shown["MAILERS"]["default"] == {"BACKEND": "django.core.mail.backends.filebased.EmailBackend",
                                           "OPTIONS": {"file_path": "/var/tmp/deuz-mail"}}


def test_email_url_turns_review_emails_on_with_debug_off(run_python):
    shown = email_settings(run_python, **PRODUCTION_ENV, EMAIL_URL="console:",
                           DEUZ_PUBLIC_URL="https://deuz.example.com")
    assert shown["DEUZ_REVIEW_EMAILS"] is True and shown["DEUZ_PUBLIC_URL"] == "https://deuz.example.com"


def test_an_unknown_scheme_stops_start_up_without_repeating_the_url(run_python):
    result = run_python(SHOW_EMAIL, EMAIL_URL="imap://deuz:s3cret@mail.example.com")
    assert result.returncode != 0
    assert "EMAIL_URL must be an email URL" in result.stderr and "s3cret" not in result.stderr
