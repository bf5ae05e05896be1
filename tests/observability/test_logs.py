"""Structured logs (issue 26): DEUZ_LOG_FORMAT=json writes one JSON object per line, naming the run, leg and epoch
of the leg that wrote it, with secrets redacted; plain text stays the default, and a bad value stops start-up."""

from __future__ import annotations

import json
import logging

import pytest

from observability.logs import JsonFormatter, leg_log_context
from tests.factories import make_queued_run

SECRET = "approval-secret-for-the-log-test-0123456789"


@pytest.fixture
def json_lines(settings):
    """What the ``deuz`` loggers write through the JSON formatter, one parsed object per line."""
    settings.DEUZ_APPROVAL_SECRET = SECRET
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Keep()
    handler.setFormatter(JsonFormatter())
    deuz = logging.getLogger("deuz")
    deuz.addHandler(handler)
    yield lambda: [json.loads(line) for line in lines]
    deuz.removeHandler(handler)


def test_a_line_is_one_json_object_with_time_level_logger_and_message(json_lines):
    logging.getLogger("deuz.worker").warning("Claiming runs failed (%s).", "OperationalError")
    [line] = json_lines()
    assert {key: line[key] for key in ("level", "logger", "message")} == {
        "level": "WARNING", "logger": "deuz.worker", "message": "Claiming runs failed (OperationalError)."}
    assert line["time"].endswith("+00:00") and "T" in line["time"]
    assert "run_id" not in line  # outside a leg, no run


def test_a_line_inside_a_leg_names_its_run_leg_and_epoch(json_lines):
    with leg_log_context(run_id="r-7", leg=3, epoch=5):
        logging.getLogger("deuz.runtime").error("Saving checkpoint failed")
    logging.getLogger("deuz.runtime").error("after the leg")
    inside, after = json_lines()
    assert (inside["run_id"], inside["leg"], inside["epoch"]) == ("r-7", 3, 5)
    assert "run_id" not in after


def test_an_exception_is_a_field_and_secrets_are_redacted(json_lines):
    try:
        raise RuntimeError(f"bad key {SECRET}")
    except RuntimeError:
        logging.getLogger("deuz.worker").exception("Leg failed with %s", SECRET)
    [line] = json_lines()
    assert "RuntimeError: bad key [redacted]" in line["exception"] and line["message"] == "Leg failed with [redacted]"
    assert SECRET not in json.dumps(line)


@pytest.mark.django_db(transaction=True)
def test_the_leg_runner_names_its_leg_on_every_line(json_lines, drain_runs, monkeypatch):
    from runs.execution import legs

    def failing_build(*args, **kwargs):
        raise RuntimeError(f"no agent today ({SECRET})")

    monkeypatch.setattr(legs, "agent_build", failing_build)
    make_queued_run("logged-1")
    drain_runs()
    [line] = [line for line in json_lines() if line["message"].startswith("Leg 1 of run logged-1 failed")]
    assert (line["run_id"], line["leg"], line["epoch"]) == ("logged-1", 1, 1)
    assert "RuntimeError: no agent today ([redacted])" in line["exception"]


def test_plain_text_is_the_default(run_python):
    result = run_python("import django; django.setup(); from django.conf import settings; "
                        "print(settings.LOGGING['handlers']['console']['formatter'])")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "plain"


def test_json_lines_from_a_started_process(run_python):
    result = run_python("import django, logging; django.setup(); logging.getLogger('deuz.worker').info('up')",
                        DEUZ_LOG_FORMAT="json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stderr.strip().splitlines()[-1])["message"] == "up"


def test_a_bad_log_format_stops_start_up_naming_the_variable(run_python):
    result = run_python("import django; django.setup()", DEUZ_LOG_FORMAT="xml")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and "DEUZ_LOG_FORMAT" in result.stderr
