from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from controlplane.diagnostics.failures import failures_backfill


class Command(BaseCommand):
    help = (
        "File the failed attempts that have no failure signature yet (those that failed before "
        "triage existed, or whose filing task was lost). Idempotent."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--limit", type=int, default=None, help="file at most this many")

    def handle(self, *args: Any, **opts: Any) -> None:
        filed = failures_backfill(limit=opts["limit"])
        self.stdout.write(f"filed {filed} failed attempts")
