"""`manage.py crashmatrix [--quick] [--database sqlite|postgres|both|current] [--replay FILE]`: real worker processes
SIGKILLed (or frozen) at every fault point, and the seed's invariants checked.

The harness lives beside the benchmarks (bench/crash_harness.py: the schedules and the matrix; bench/crash_case.py:
one case driven to its end; bench/crash_invariants.py: the checks); this command parses the options and runs it.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from bench.crash_harness import MatrixError, crashmatrix_run


class Command(BaseCommand):
    help = "Kill real worker processes at every fault point under several schedules and check the invariants."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--quick", action="store_true", help="The compact matrix CI runs (a dozen cases).")
        parser.add_argument("--database", choices=["sqlite", "postgres", "both", "current"], default="sqlite",
                            help="Scratch SQLite and/or PostgreSQL databases, or the configured one (current).")
        parser.add_argument("--postgres-url", default=os.environ.get("DEUZ_CRASHMATRIX_POSTGRES_URL"),
                            help="A PostgreSQL server to create the scratch database on (default: "
                                 "DEUZ_CRASHMATRIX_POSTGRES_URL, else DATABASE_URL when it is PostgreSQL).")
        parser.add_argument("--replay", metavar="FILE", help="Run the schedule of a failed case written earlier.")
        parser.add_argument("--failures", metavar="DIR", default="crashmatrix-failures",
                            help="Where failing cases' schedules and ledgers are written (default "
                                 "./crashmatrix-failures).")
        parser.add_argument("--only", metavar="TEXT", help="Only the cases whose name contains TEXT.")

    def handle(self, *args: Any, database: str, postgres_url: str | None, quick: bool, replay: str | None,
               failures: str, only: str | None, **options: Any) -> None:
        try:
            crashmatrix_run(database=database, stdout=self.stdout, postgres_url=postgres_url, quick=quick,
                            replay=replay, failures=failures, only=only)
        except MatrixError as exc:
            raise CommandError(str(exc)) from None
