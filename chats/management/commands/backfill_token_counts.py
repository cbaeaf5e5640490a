"""Give legacy messages their token counts, and recount those made by another counter.

    python manage.py backfill_token_counts [--tenant ID] [--batch-size N] [--max-seconds S]

Batched (keyset by id), resumable (stop it any time; the next run continues where the work
is), idempotent (a second run updates nothing). The same code runs every few minutes in the
``backfill_token_counts`` beat job (``chats.token_counts.tasks``).
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from chatplatform.django_internals import output_stream
from chatplatform.models import Tenant
from chats.token_counts.backfill import (
    DEFAULT_BATCH_SIZE,
    MAX_BATCH_SIZE,
    backfill_tenant,
    pending_estimate,
)


class Command(BaseCommand):
    help = "Backfill message token counts (batched, resumable, idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", type=int, help="Only this tenant (id).")
        parser.add_argument(
            "--batch-size",
            type=int,
            default=DEFAULT_BATCH_SIZE,
            help=f"Rows per batch (default {DEFAULT_BATCH_SIZE}, at most {MAX_BATCH_SIZE}).",
        )
        parser.add_argument(
            "--max-seconds",
            type=float,
            default=None,
            help="Stop after this long (the next run resumes).",
        )
        parser.add_argument(
            "--workers",
            type=int,
            default=0,
            help="Writer threads on PostgreSQL (0: write in the reading thread).",
        )
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args: Any, **options: Any) -> None:
        batch_size = options["batch_size"]
        if not 1 <= batch_size <= MAX_BATCH_SIZE:
            raise CommandError(f"--batch-size must be between 1 and {MAX_BATCH_SIZE}.")
        tenants = Tenant.objects.order_by("pk")
        if options["tenant"] is not None:
            tenants = tenants.filter(pk=options["tenant"])
            if not tenants.exists():
                raise CommandError(f"No tenant with id {options['tenant']}.")
        deadline = time.monotonic() + options["max_seconds"] if options["max_seconds"] else None
        show = not options["no_progress"]
        totals = {"scanned": 0, "updated": 0, "batches": 0}
        complete = True
        for tenant in tenants.iterator():
            total = pending_estimate(tenant) if show else None
            if show and not total:
                self.stdout.write(f"{tenant} (id {tenant.pk}): nothing to do")
            bar = tqdm(
                total=total,
                desc=f"tenant {tenant.pk}",
                unit="msg",
                disable=not show or not total,
                file=output_stream(self.stderr),
            )

            def on_batch(scanned: int, updated: int, bar: Any = bar) -> None:
                bar.update(scanned)
                bar.set_postfix(updated=updated)

            with bar:
                stats = backfill_tenant(
                    tenant,
                    batch_size=batch_size,
                    deadline=deadline,
                    on_batch=on_batch,
                    workers=max(0, options["workers"]),
                )
            totals["scanned"] += stats.scanned
            totals["updated"] += stats.updated
            totals["batches"] += stats.batches
            if stats.skipped_tenants:
                self.stderr.write(f"tenant {tenant.pk}: no token counter available; skipped")
            if not stats.complete:
                complete = False
                break
        summary = (
            f"scanned {totals['scanned']:,} messages in {totals['batches']:,} batches, "
            f"updated {totals['updated']:,}"
        )
        if complete:
            self.stdout.write(self.style.SUCCESS(f"Done: {summary}."))
        else:
            self.stdout.write(
                self.style.WARNING(f"Stopped at --max-seconds: {summary}. Run again to resume.")
            )
