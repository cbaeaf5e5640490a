"""Scratch data for benchmarks: a tenant and conversations of N multilingual messages,
inserted in bulk (COPY on PostgreSQL) and reused when already present."""

from __future__ import annotations

import io
import random
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from chatplatform.models import Tenant
from chatplatform.models.conversations import Conversation, Message, Participant
from chatplatform.services import membership_add, tenant_create
from chatplatform.tenancy.scoping import tenant_scope

SENTENCES = [
    "Could you summarise what we decided about the release schedule last week?",
    "Мы договорились перенести релиз на четверг, если тесты будут зелёными.",
    "Je pense que la migration de la base de données doit être faite avant vendredi.",
    "¿Puedes recordarme cuál era el presupuesto para el segundo trimestre?",
    "Die Kundin hat um eine Rückmeldung zur Rechnung vom 14. März gebeten.",
    "次の会議では新しいデザインについて話し合いましょう。",
    "다음 주 월요일까지 보고서를 제출해야 합니다.",
    "我们需要在月底之前完成所有的测试用例。",
    "Ми обговорили нову політику безпеки та доступу до сервера.",
    "def total(items):\n    return sum(item.price * item.quantity for item in items)",
    "The latency p95 went from 180 ms to 95 ms after the index change.",
    "هل يمكنك إرسال التقرير النهائي قبل نهاية اليوم؟",
    "Sure — I'll send the draft tonight and we can review it tomorrow morning.",
    "O cliente confirmou a reunião para terça-feira às 15h.",
]

BENCH_SLUG = "bench-assembly"


def bench_tenant() -> Tenant:
    tenant = Tenant.objects.filter(slug=BENCH_SLUG).first()
    if tenant is None:
        tenant = tenant_create(name="Benchmark", slug=BENCH_SLUG)
    return tenant


def bench_user(tenant: Tenant) -> Any:
    User = get_user_model()
    user, created = User.objects.get_or_create(
        username="bench-user", defaults={"first_name": "Bench", "last_name": "User"}
    )
    if created:
        membership_add(tenant=tenant, user=user)
    return user


def message_texts(seed: int = 7, pool: int = 400) -> list[str]:
    """A pool of message texts: one to four sentences of mixed languages."""
    rng = random.Random(seed)
    return [" ".join(rng.choices(SENTENCES, k=rng.randint(1, 4))) for _ in range(pool)]


def conversation_with(
    tenant: Tenant, user: Any, size: int, counter: Any, title_prefix: str = "bench"
) -> Conversation:
    """A conversation of exactly ``size`` messages (created once, then reused)."""
    title = f"{title_prefix}-{size}"
    with tenant_scope(tenant):
        existing = Conversation.objects.filter(title=title, message_count=size).first()
        if existing is not None:
            return existing
        Conversation.objects.filter(title=title).delete()
        conversation = Conversation.objects.create(tenant=tenant, title=title, created_by=user)
        Participant.objects.create(tenant=tenant, conversation=conversation, user=user)
    texts = message_texts()
    counts = [counter.count(t) for t in texts]
    start = timezone.now() - timedelta(minutes=size)
    overhead = counter.message_overhead
    total_tokens = _insert(tenant, conversation, user, size, texts, counts, counter.name, start)
    with tenant_scope(tenant):
        Conversation.objects.filter(pk=conversation.pk).update(
            last_seq=size, message_count=size, history_tokens=total_tokens + overhead * size
        )
        conversation.refresh_from_db()
    return conversation


def _insert(
    tenant: Tenant,
    conversation: Conversation,
    user: Any,
    size: int,
    texts: list[str],
    counts: list[int],
    counter_name: str,
    start: Any,
) -> int:
    total = 0
    if connection.vendor == "postgresql":
        columns = (
            "tenant_id, conversation_id, seq, author_id, role, content, status, token_count, "
            "token_counter, error_code, error_message, attachment, attachment_type, "
            "created_at, updated_at"
        )
        with transaction.atomic(), connection.cursor() as cursor:
            raw = cursor.cursor
            with raw.copy(f"COPY chats_message ({columns}) FROM STDIN") as copy:
                for seq in range(1, size + 1):
                    index = seq % len(texts)
                    total += counts[index]
                    user_turn = seq % 2 == 1
                    stamp = start + timedelta(minutes=seq)
                    copy.write_row(
                        (
                            tenant.pk,
                            conversation.pk,
                            seq,
                            user.pk if user_turn else None,
                            "user" if user_turn else "assistant",
                            texts[index],
                            "complete",
                            counts[index],
                            counter_name,
                            "",
                            "",
                            "",
                            "",
                            stamp,
                            stamp,
                        )
                    )
        with connection.cursor() as cursor:
            # Sets the visibility map, so the history walk is an index-only scan.
            cursor.execute("VACUUM ANALYZE chats_message")
        return total
    batch: list[Message] = []
    with transaction.atomic(), tenant_scope(tenant):
        for seq in range(1, size + 1):
            index = seq % len(texts)
            total += counts[index]
            user_turn = seq % 2 == 1
            batch.append(
                Message(
                    tenant=tenant,
                    conversation=conversation,
                    seq=seq,
                    author=user if user_turn else None,
                    role="user" if user_turn else "assistant",
                    content=texts[index],
                    token_count=counts[index],
                    token_counter=counter_name,
                )
            )
            if len(batch) >= 5000:
                Message.objects.bulk_create(batch)
                batch.clear()
        Message.objects.bulk_create(batch)
    return total


__all__ = ["bench_tenant", "bench_user", "conversation_with", "io"]
