"""Benchmark the token-count backfill on the configured database.

    python manage.py bench_backfill --messages 200000 [--json] [--batch-size N]
                                     [--conversations N] [--counter estimator] [--keep]

Creates (or reuses) a scratch tenant whose policy model counts with the local estimator,
inserts N legacy messages (no token count) with fast bulk inserts (COPY on PostgreSQL,
bulk_create elsewhere), then times the real backfill (``chats.token_counts.backfill``) over them and
prints ``messages``, ``messages_per_s`` and ``counter``. The scratch data is deleted at the
end unless ``--keep``; a run always starts from freshly inserted rows (scratch data left by
an earlier run is deleted first), because rows reset in place would leave the table bloated
and make the timing depend on the history of earlier runs.
"""

from __future__ import annotations

import json
import random
import time
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction
from django.utils import timezone

from chatplatform.core.tokens import CounterNotAvailable, get_counter
from chatplatform.models import ContextPolicy, ModelProfile, Tenant
from chatplatform.models.conversations import Conversation, Message
from chatplatform.services import tenant_create
from chatplatform.tenancy.scoping import all_tenants
from chats.token_counts.backfill import backfill_tenant

SCRATCH_SLUG = "bench-backfill-scratch"
PROFILE_NAME = "Bench backfill counter"
POLICY_NAME = "Bench backfill"

_TEXT = (
    "the meeting moved to Thursday because the client in Lisbon asked for more time to review "
    "contract budget invoice deployment server latency database migration we agreed that "
    "Maria will send the report before 5 pm and Oleksandr checks the numbers again tomorrow "
    "could you summarise what changed since version 2.4 and why the tests fail on CI "
    "привет давай обсудим план на следующую неделю и бюджет проекта "
    "зустріч перенесли на четвер бо клієнт попросив більше часу "
    "東京の会議は木曜日に変更されました 予算を確認してください "
    "def handle(self, request): return JsonResponse({'ok': True, 'items': items}) "
    "https://example.com/docs/backfill?id=42 alice@example.com 3.14159 2025-03-14 €80"
)
_WORDS = _TEXT.split(" ")


def _content(rng: random.Random) -> str:
    words = rng.randint(8, 120)
    sentence = " ".join(rng.choice(_WORDS) for _ in range(words))
    if rng.random() < 0.3:
        sentence += "?\n" + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 30)))
    return sentence[0].upper() + sentence[1:] + "."


class Command(BaseCommand):
    help = "Time the token-count backfill over N legacy messages of a scratch tenant."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--messages", type=int, default=200_000)
        parser.add_argument("--conversations", type=int, default=None)
        parser.add_argument("--batch-size", type=int, default=10_000)
        parser.add_argument(
            "--workers",
            type=int,
            default=2,
            help="Writer threads on PostgreSQL (0: write in the reading thread).",
        )
        parser.add_argument("--counter", default="estimator", help="Counter name to time.")
        parser.add_argument("--json", action="store_true", help="Print only the JSON result.")
        parser.add_argument("--keep", action="store_true", help="Keep the scratch data.")
        parser.add_argument("--seed", type=int, default=7)

    def handle(self, *args: Any, **options: Any) -> None:
        n = options["messages"]
        if n < 1:
            raise CommandError("--messages must be at least 1.")
        try:
            counter = get_counter(options["counter"])
        except (CounterNotAvailable, ImportError) as exc:
            raise CommandError(
                f"counter {options['counter']!r} is not available here ({exc}); "
                "try --counter o200k_base"
            ) from exc
        conversations = options["conversations"] or max(1, n // 1000)
        quiet = options["json"]

        def say(text: str) -> None:
            if not quiet:
                self.stdout.write(text)

        started = time.perf_counter()
        tenant = self._prepare(n, conversations, options["counter"], options["seed"], say)
        self._settle_table()
        say(f"scratch data ready in {time.perf_counter() - started:.1f}s; backfilling…")
        try:
            begin = time.perf_counter()
            stats = backfill_tenant(
                tenant, batch_size=options["batch_size"], workers=options["workers"]
            )
            elapsed = time.perf_counter() - begin
            if stats.updated != n:
                raise CommandError(f"backfill updated {stats.updated} of {n} messages")
            result = {
                "messages": n,
                "messages_per_s": round(n / elapsed, 1) if elapsed > 0 else float(n),
                "counter": counter.name,
            }
            say(
                f"{stats.batches} batches, {elapsed:.2f}s on {connection.vendor} "
                f"(batch size {options['batch_size']}, {options['workers']} writers)"
            )
            self.stdout.write(json.dumps(result))
        finally:
            if not options["keep"]:
                self._cleanup(tenant)
                self._settle_table()  # give the space of the deleted rows back for reuse
                say("scratch data removed")

    # --- scratch data ---------------------------------------------------------------------

    def _prepare(
        self, n: int, conversations: int, counter_name: str, seed: int, say: Any
    ) -> Tenant:
        leftover = Tenant.objects.filter(slug=SCRATCH_SLUG).first()
        if leftover is not None:
            say("removing the scratch data of an earlier run")
            self._cleanup(leftover)
            self._settle_table()
        return self._create(n, conversations, counter_name, seed)

    def _settle_table(self) -> None:
        """On PostgreSQL, VACUUM ANALYZE the messages table: before the timing it flushes the
        GIN pending list the inserts filled and refreshes the statistics; after a cleanup it
        makes the deleted rows' space reusable."""
        if connection.vendor != "postgresql":
            return
        table = connection.ops.quote_name(Message._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(f"VACUUM (ANALYZE) {table}")

    def _create(self, n: int, conversations: int, counter_name: str, seed: int) -> Tenant:
        rng = random.Random(seed)
        with transaction.atomic():
            tenant = tenant_create(name="Backfill benchmark (scratch)", slug=SCRATCH_SLUG)
            with all_tenants():
                profile = ModelProfile.objects.create(
                    tenant=tenant,
                    name=PROFILE_NAME,
                    provider="offline",
                    model="offline",
                    context_window=200_000,
                    max_output_tokens=8_192,
                    tokenizer=counter_name,
                )
                policy = ContextPolicy.objects.create(
                    tenant=tenant,
                    name=POLICY_NAME,
                    model_profile=profile,
                    max_context_tokens=64_000,
                )
                Tenant.objects.filter(pk=tenant.pk).update(active_policy=policy)
                tenant.active_policy = policy
                per = [
                    n // conversations + (1 if i < n % conversations else 0)
                    for i in range(conversations)
                ]
                convs = Conversation.objects.bulk_create(
                    [
                        Conversation(
                            tenant=tenant,
                            title=f"bench {i}",
                            created_by=tenant.service_user,
                            last_seq=count,
                            message_count=count,
                        )
                        for i, count in enumerate(per)
                    ]
                )
        now = timezone.now()
        rows = (
            (
                tenant.pk,
                conv.pk,
                seq,
                "user" if seq % 2 else "assistant",
                _content(rng),
                now - timedelta(seconds=n - seq),
            )
            for conv, count in zip(convs, per, strict=True)
            for seq in range(1, count + 1)
        )
        if connection.vendor == "postgresql":
            self._copy(rows)
        else:
            self._bulk_create(rows)
        return tenant

    def _copy(self, rows: Any) -> None:
        columns = (
            "tenant_id, conversation_id, seq, role, content, status, token_counter, "
            "error_code, error_message, attachment_type, created_at, updated_at"
        )
        table = connection.ops.quote_name(Message._meta.db_table)
        with transaction.atomic(), connection.cursor() as cursor:
            raw = cursor.cursor  # the psycopg cursor behind Django's wrapper
            with raw.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for tenant_id, conv_id, seq, role, content, at in rows:
                    copy.write_row(
                        (tenant_id, conv_id, seq, role, content, "complete", "", "", "", "", at, at)
                    )

    def _bulk_create(self, rows: Any) -> None:
        batch: list[Message] = []
        with transaction.atomic(), all_tenants():
            for tenant_id, conv_id, seq, role, content, at in rows:
                batch.append(
                    Message(
                        tenant_id=tenant_id,
                        conversation_id=conv_id,
                        seq=seq,
                        role=role,
                        content=content,
                        status="complete",
                        token_count=None,
                        token_counter="",
                        created_at=at,
                    )
                )
                if len(batch) >= 5000:
                    Message.objects.bulk_create(batch)
                    batch = []
            if batch:
                Message.objects.bulk_create(batch)

    def _cleanup(self, tenant: Tenant) -> None:
        table = connection.ops.quote_name(Message._meta.db_table)
        service_user_id = tenant.service_user_id
        with transaction.atomic():
            with connection.cursor() as cursor:
                # 10^5+ rows: one statement, not Django's collector (it loads every row).
                cursor.execute(f"DELETE FROM {table} WHERE tenant_id = %s", [tenant.pk])  # noqa: S608
            with all_tenants():
                Tenant.objects.filter(pk=tenant.pk).update(active_policy=None)
                ContextPolicy.objects.filter(tenant=tenant).delete()
                tenant.delete()
            if service_user_id:
                get_user_model().objects.filter(pk=service_user_id).delete()
