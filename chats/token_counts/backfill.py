"""Token-count backfill: legacy messages get counts; counts of another counter are redone.

A message's count must come from the counter of its policy's model (``targets``). Rows with
no count (legacy imports) or counted by another counter (the tenant switched models) are
recounted, a batch at a time (``batches``), each batch written safely against concurrent
writers (``updates``).

- **Resumable and idempotent**: a stopped run loses at most its open batch; updated rows no
  longer match, so the next run continues where the work is; a second run updates 0 rows.
- **Prompt for what an assembly met**: a turn whose history held messages without a valid
  count (estimated on the fly) queues them (``chats.token_counts.recount``);
  :func:`backfill_messages` counts exactly those, with the conversation's policy counter,
  under the same rules.
- **Cheap when there is nothing to do**: :class:`~summaries.models.TokenBackfillState` keeps,
  per tenant, the signature of the counters in force and the id up to which a full pass
  verified them; later runs only read rows without a count and rows above that id. A new
  signature (another model or tokenizer) starts a new full pass, resumable from its cursor.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable

from django.db import connection, transaction
from django.db.models import Q

from chatplatform.core.tokens import CounterNotAvailable
from chatplatform.counting import storage_counter_for
from chatplatform.models import Tenant
from chatplatform.models.conversations import Conversation, Message, Status
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import tenant_scope
from chats.token_counts.batches import (
    BackfillStats,
    DeadlineReached,
    KeysetRun,
    ProgressCallback,
    WriterPool,
)
from chats.token_counts.targets import Targets, targets_for
from chats.token_counts.updates import ROW_FIELDS, Row, apply_updates, plan_updates
from summaries.models import TokenBackfillState

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 5000
MAX_BATCH_SIZE = 50_000
OVERRIDE_CHUNK = 500


def pending_estimate(tenant: Tenant) -> int:
    """About how many rows a run would read for ``tenant`` (for progress bars): rows
    without a count (partial index) plus rows above the verified watermark with another
    counter than the default."""
    targets = targets_for(tenant)
    with tenant_scope(tenant.pk):
        state = TokenBackfillState.objects.filter(tenant_id=tenant.pk).first()
        start = 0
        if state is not None and state.signature == targets.signature:
            start = max(state.verified_upto_id, state.cursor_id)
        nulls = Message.objects.filter(token_count__isnull=True).count()
        others = (
            Message.objects.filter(pk__gt=start, token_count__isnull=False)
            .exclude(token_counter=targets.default.name)
            .count()
        )
    return nulls + others


def backfill_tenant(
    tenant: Tenant,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    deadline: float | None = None,
    on_batch: ProgressCallback | None = None,
    stats: BackfillStats | None = None,
    workers: int = 0,
) -> BackfillStats:
    """Backfill one tenant (three keyset passes; see the module docstring).

    ``workers`` > 0 applies batches in that many writer threads (PostgreSQL only; each has
    its own connection, so the rows must be committed data, not a test transaction's),
    with up to ``workers + 1`` batches in flight.
    """
    stats = stats or BackfillStats()
    batch_size = max(1, min(batch_size, MAX_BATCH_SIZE))
    try:
        targets = targets_for(tenant)
    except (CounterNotAvailable, ImportError) as exc:
        logger.warning("backfill: no counter for tenant %s (%s); skipped", tenant.pk, exc)
        stats.skipped_tenants.append(tenant.pk)
        return stats
    stats.tenants += 1
    signature = targets.signature
    with tenant_scope(tenant.pk):
        state, _ = TokenBackfillState.objects.get_or_create(
            tenant_id=tenant.pk, defaults={"signature": signature}
        )
        if state.signature != signature:
            state.signature, state.verified_upto_id, state.cursor_id = signature, 0, 0
            state.save(update_fields=["signature", "verified_upto_id", "cursor_id", "updated_at"])
        newest = Message.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    pool = WriterPool(workers) if workers > 0 and connection.vendor == "postgresql" else None
    run = KeysetRun(tenant.pk, targets, batch_size, deadline, on_batch, stats, pool, workers + 1)
    verified = state.verified_upto_id

    def save_cursor(last_id: int) -> None:
        with tenant_scope(tenant.pk):
            TokenBackfillState.objects.filter(pk=state.pk, signature=signature).update(
                cursor_id=last_id
            )

    try:
        # 1. Rows without a count, wherever they are.
        run.keyset(Q(token_count__isnull=True), after_id=0)
        # 2. Rows counted by another counter than the tenant's, above the watermark.
        run.keyset(
            Q(token_count__isnull=False) & ~Q(token_counter=targets.default.name),
            after_id=max(verified, state.cursor_id),
            on_cursor=save_cursor,
        )
        # 3. Rows of overriding conversations counted with the tenant's default counter.
        by_counter: dict[str, list[int]] = defaultdict(list)
        for conversation_id, counter in targets.overrides.items():
            by_counter[counter.name].append(conversation_id)
        for conversation_ids in by_counter.values():
            for chunk in _chunks(sorted(conversation_ids), OVERRIDE_CHUNK):
                run.keyset(
                    Q(
                        conversation_id__in=chunk,
                        token_count__isnull=False,
                        token_counter=targets.default.name,
                    ),
                    after_id=verified,
                )
    except DeadlineReached:
        stats.complete = False
        return stats
    finally:
        if pool is not None:
            pool.close()
    with tenant_scope(tenant.pk):
        TokenBackfillState.objects.filter(pk=state.pk, signature=signature).update(
            verified_upto_id=max(verified, newest), cursor_id=max(verified, newest)
        )
    return stats


def _chunks(items: list[int], size: int) -> Iterable[list[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


#: Most message ids one recount request handles (a turn's history and retrieved messages).
MAX_RECOUNT_IDS = 2000


def backfill_messages(
    tenant_id: int, conversation_id: int, message_ids: Iterable[int]
) -> BackfillStats:
    """Count the messages ``message_ids`` of one conversation that have no count or a count
    made by another counter than the conversation's policy model uses (at most
    :data:`MAX_RECOUNT_IDS`, in one transaction).

    Same rules as the tenant pass: rows changed meanwhile are left alone, ``history_tokens``
    moves by the difference of the rows updated, streaming rows are skipped; a second run
    updates nothing. Ids of other conversations or tenants are ignored.
    """
    stats = BackfillStats()
    ids = sorted({int(i) for i in message_ids})[:MAX_RECOUNT_IDS]
    if not ids:
        return stats
    with tenant_scope(tenant_id):
        conversation = Conversation.objects.filter(pk=conversation_id).first()
        if conversation is None:
            return stats
        try:
            counter = storage_counter_for(policy_for(conversation).model_profile)
        except (CounterNotAvailable, ImportError) as exc:
            logger.warning("recount: no counter for tenant %s (%s); skipped", tenant_id, exc)
            stats.skipped_tenants.append(tenant_id)
            return stats
        rows: list[Row] = list(
            Message.objects.filter(conversation_id=conversation_id, pk__in=ids)
            .exclude(status=Status.STREAMING)
            .values_list(*ROW_FIELDS)
        )
    updates = plan_updates(rows, Targets(default=counter, overrides={}))
    with transaction.atomic():
        updated = apply_updates(tenant_id, updates)
    stats.tenants, stats.batches = 1, 1
    stats.scanned, stats.updated = len(rows), updated
    return stats


def backfill_token_counts(
    *,
    tenant_id: int | None = None,
    from_tenant_id: int = 0,
    batch_size: int = DEFAULT_BATCH_SIZE,
    deadline: float | None = None,
    on_batch: ProgressCallback | None = None,
    on_tenant: Callable[[Tenant], None] | None = None,
    workers: int = 0,
) -> tuple[BackfillStats, int | None]:
    """Backfill one tenant, or every tenant with ``id >= from_tenant_id`` in id order.

    Returns the stats and, when stopped by ``deadline``, the id of the tenant to resume
    from (its rows are resumable on their own; tenants before it are done).
    """
    stats = BackfillStats()
    if tenant_id is not None:
        tenants: Iterable[Tenant] = Tenant.objects.filter(pk=tenant_id)
    else:
        tenants = Tenant.objects.filter(pk__gte=from_tenant_id).order_by("pk").iterator()
    for tenant in tenants:
        if on_tenant is not None:
            on_tenant(tenant)
        backfill_tenant(
            tenant,
            batch_size=batch_size,
            deadline=deadline,
            on_batch=on_batch,
            stats=stats,
            workers=workers,
        )
        if not stats.complete:
            return stats, tenant.pk
    return stats, None
