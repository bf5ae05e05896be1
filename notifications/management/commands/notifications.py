"""`manage.py notifications deliver`: one pass over the outbox, as a worker makes in its loop (the workers
deliver on their own; this is for operators and tests)."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand

from notifications.delivery.drain import OUTBOX_BATCH, outbox_deliver
from runs.execution.worker import worker_id_default


class Command(BaseCommand):
    help = "The outbox of webhooks: deliver (make one attempt at every message that is due now)."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        deliver = actions.add_parser("deliver", help="Make one attempt at every message due now, then stop.")
        deliver.add_argument("--worker-id", default=None, help="Name in the attempts' log (default host:pid).")

    def handle(self, *args, action: str, worker_id: str | None, **options) -> None:
        worker_id = worker_id or f"{worker_id_default()}:deliver"
        total = 0
        while True:  # pass after pass, until a pass finds less than a full batch due
            claimed = async_to_sync(outbox_deliver)(worker_id=worker_id)
            total += claimed
            if claimed < OUTBOX_BATCH:
                break
        self.stdout.write(f"{total} attempt{'s' if total != 1 else ''} made.")
