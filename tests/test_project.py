"""Project-wide invariants: system checks pass, migrations match models, apps import without Django."""

from __future__ import annotations

import pytest
from django.core.management import call_command


@pytest.mark.django_db  # model checks ask the database what it supports (JSONField, indexes)
def test_system_checks_pass():
    call_command("check", fail_level="WARNING")


@pytest.mark.django_db
def test_models_and_migrations_agree():
    call_command("makemigrations", check=True, dry_run=True, verbosity=0)


def test_app_packages_import_without_django(run_python):
    # Workers and the pure runtime import these packages; Django must load only on demand.
    result = run_python(
        "import sys, runs, approvals; print('django' in sys.modules)",
        DJANGO_SETTINGS_MODULE="",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
