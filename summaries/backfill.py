"""Token-count backfill: legacy messages get counts; counts of another counter are redone.

A message's count must come from the counter of its policy's model (``storage_counter_for``:
the conversation's policy override, else the tenant's active policy). Rows with no count
(legacy imports) or counted by another counter (the tenant switched models) are recounted.

- **Batched, keyset by id**: ``WHERE tenant_id = T AND id > last ... ORDER BY id LIMIT n``,
  never OFFSET; each batch is one read, one bulk UPDATE of the messages and one bulk UPDATE of
  the touched conversations' ``history_tokens`` (their rows locked in id order first, so
  concurrent writers cannot deadlock), in one transaction. On PostgreSQL the updates are
  single ``UPDATE ... FROM unnest(arrays)`` statements (a few array parameters whatever the
  batch size); on SQLite ``WITH v(...) AS (VALUES ...) UPDATE ... FROM v``.
- **Fast on PostgreSQL**: most of a batch's time is the database maintaining the message
  indexes (a non-HOT update touches every index, the full-text GIN one included), so with
  ``workers`` the batches are written by threads on their own connections while the caller
  reads and counts the next one; commits skip the WAL flush wait (``synchronous_commit``
  off for these transactions: a crash can only lose batches the next run redoes).
- **Safe against concurrent writers**: a row is only updated if it still holds the count
  and counter that were read (otherwise it changed meanwhile and is left alone), and
  ``history_tokens`` moves by the difference of exactly the rows updated (``RETURNING``), in
  the same convention ``message_create`` uses (count + the counter's per-message overhead).
  Messages still streaming are skipped (``message_finish`` counts them).
- **Resumable and idempotent**: a stopped run loses at most its open batch; updated rows no
  longer match, so the next run continues where the work is; a second run updates 0 rows.
- **Prompt for what an assembly met**: a turn whose history held messages without a valid
  count (estimated on the fly) queues them (``chats.assembly.recount``); :func:`backfill_messages`
  counts exactly those, with the conversation's policy counter, under the same rules.
- **Cheap when there is nothing to do**: :class:`~summaries.models.TokenBackfillState` keeps,
  per tenant, the signature of the counters in force and the id up to which a full pass
  verified them; later runs only read rows without a count and rows above that id. A new
  signature (another model or tokenizer) starts a new full pass, resumable from its cursor.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.db import connection, transaction
from django.db import connections as db_connections
from django.db.models import Q

from chatplatform.core.tokens import CounterNotAvailable, TokenCounter, get_counter
from chatplatform.counting import storage_counter_for
from chatplatform.models import ContextPolicy, Tenant
from chatplatform.models.conversations import Conversation, Message, Status
from chatplatform.tenancy.scoping import tenant_scope
from summaries.models import TokenBackfillState

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 5000
MAX_BATCH_SIZE = 50_000
SQLITE_ROWS_PER_STATEMENT = 2000  # 5 parameters a row, well under SQLite's 32,766
OVERRIDE_CHUNK = 500
DEFAULT_OVERHEAD = 4

ProgressCallback = Callable[[int, int], None]  # (rows scanned, rows updated) of a batch


@dataclass
class BackfillStats:
    tenants: int = 0
    scanned: int = 0
    updated: int = 0
    batches: int = 0
    complete: bool = True
    skipped_tenants: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "tenants": self.tenants,
            "scanned": self.scanned,
            "updated": self.updated,
            "batches": self.batches,
            "complete": self.complete,
            "skipped_tenants": self.skipped_tenants,
        }


@dataclass(frozen=True)
class Targets:
    """The counters a tenant's messages must be counted with."""

    default: TokenCounter
    overrides: dict[int, TokenCounter]  # conversation id -> counter, where != default

    @property
    def signature(self) -> str:
        if not self.overrides:
            return self.default.name
        pairs = ",".join(f"{c}:{k.name}" for c, k in sorted(self.overrides.items()))
        digest = hashlib.sha256(pairs.encode()).hexdigest()[:16]
        return f"{self.default.name}|{digest}"[:200]

    def for_conversation(self, conversation_id: int) -> TokenCounter:
        return self.overrides.get(conversation_id, self.default)


def _tenant_policy(tenant: Tenant) -> ContextPolicy | None:
    with tenant_scope(tenant.pk):
        queryset = ContextPolicy.objects.select_related("model_profile")
        if tenant.active_policy_id:
            found = queryset.filter(pk=tenant.active_policy_id).first()
            if found is not None:
                return found
        return queryset.filter(tenant__isnull=True, name="Hybrid").first()


def targets_for(tenant: Tenant) -> Targets:
    """The tenant's default counter and its conversations' overrides (bounded by how many
    conversations override the policy, normally few)."""
    policy = _tenant_policy(tenant)
    default = storage_counter_for(policy.model_profile if policy else None)
    overrides: dict[int, TokenCounter] = {}
    with tenant_scope(tenant.pk):
        pairs = list(
            Conversation.objects.filter(policy__isnull=False).values_list("pk", "policy_id")
        )
        if pairs:
            policies = {
                p.pk: p
                for p in ContextPolicy.objects.filter(
                    pk__in={pid for _, pid in pairs}
                ).select_related("model_profile")
            }
            for conversation_id, policy_id in pairs:
                own = policies.get(policy_id)
                if own is None:
                    continue
                counter = storage_counter_for(own.model_profile)
                if counter.name != default.name:
                    overrides[conversation_id] = counter
    return Targets(default=default, overrides=overrides)


def _overhead(counter_name: str) -> int:
    try:
        return get_counter(counter_name).message_overhead
    except (CounterNotAvailable, ImportError, ValueError):
        return DEFAULT_OVERHEAD


Row = tuple[int, int, str, int | None, str]  # id, conversation, content, count, counter
ROW_FIELDS = ("pk", "conversation_id", "content", "token_count", "token_counter")
Update = tuple[int, int, int, str, int | None, str, int]  # + new count, new counter, delta


def _plan(rows: Sequence[Row], targets: Targets) -> list[Update]:
    """Count the rows that need it, grouped by counter (one ``count_many`` per counter)."""
    by_counter: dict[str, list[Row]] = defaultdict(list)
    counters: dict[str, TokenCounter] = {}
    for row in rows:
        counter = targets.for_conversation(row[1])
        if row[3] is not None and row[4] == counter.name:
            continue
        by_counter[counter.name].append(row)
        counters[counter.name] = counter
    updates: list[Update] = []
    overheads: dict[str, int] = {}
    for name, group in by_counter.items():
        counter = counters[name]
        counts = counter.count_many([row[2] for row in group])
        for (message_id, conversation_id, _, old, old_counter), new in zip(
            group, counts, strict=True
        ):
            if old is None:
                delta = new + counter.message_overhead
            else:
                if old_counter not in overheads:
                    overheads[old_counter] = _overhead(old_counter)
                delta = (new + counter.message_overhead) - (old + overheads[old_counter])
            updates.append((message_id, conversation_id, new, name, old, old_counter, delta))
    return updates


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


def _apply(tenant_id: int, updates: list[Update]) -> int:
    """Write ``updates`` (inside the caller's transaction); return how many rows changed.

    Only rows that still hold the count and counter that were read are updated, and the
    conversations' ``history_tokens`` move by the deltas of exactly those rows.
    """
    if not updates:
        return 0
    vendor = connection.vendor
    if vendor == "postgresql":
        updated_ids = _apply_postgresql(tenant_id, updates)
    elif vendor == "sqlite":
        updated_ids = _apply_sqlite(tenant_id, updates)
    else:  # pragma: no cover - other backends: plain bulk_update, no concurrency check
        updated_ids = _apply_generic(tenant_id, updates)
    done = set(updated_ids)
    deltas: dict[int, int] = defaultdict(int)
    for message_id, conversation_id, *_rest, delta in updates:
        if message_id in done:
            deltas[conversation_id] += delta
    deltas = {c: d for c, d in deltas.items() if d}
    if deltas:
        _add_history_tokens(tenant_id, deltas)
    return len(done)


def _apply_postgresql(tenant_id: int, updates: list[Update]) -> list[int]:
    message = _quote(Message._meta.db_table)
    sql = f"""
        UPDATE {message} AS m
        SET token_count = v.new_count, token_counter = v.new_counter
        FROM unnest(%s::bigint[], %s::integer[], %s::varchar[], %s::integer[], %s::varchar[])
             AS v(id, new_count, new_counter, old_count, old_counter)
        WHERE m.id = v.id AND m.tenant_id = %s
          AND m.token_counter = v.old_counter
          AND m.token_count IS NOT DISTINCT FROM v.old_count
        RETURNING m.id
    """  # noqa: S608 - identifiers are quoted model table names, values are parameters
    params: list[Any] = [
        [u[0] for u in updates],
        [u[2] for u in updates],
        [u[3] for u in updates],
        [u[4] for u in updates],
        [u[5] for u in updates],
        tenant_id,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _apply_sqlite(tenant_id: int, updates: list[Update]) -> list[int]:
    message = _quote(Message._meta.db_table)
    done: list[int] = []
    with connection.cursor() as cursor:
        for start in range(0, len(updates), SQLITE_ROWS_PER_STATEMENT):
            chunk = updates[start : start + SQLITE_ROWS_PER_STATEMENT]
            values = ", ".join(["(%s, %s, %s, %s, %s)"] * len(chunk))
            sql = f"""
                WITH v(id, new_count, new_counter, old_count, old_counter) AS (VALUES {values})
                UPDATE {message}
                SET token_count = v.new_count, token_counter = v.new_counter
                FROM v
                WHERE {message}.id = v.id AND {message}.tenant_id = %s
                  AND {message}.token_counter = v.old_counter
                  AND {message}.token_count IS v.old_count
                RETURNING {message}.id
            """  # noqa: S608 - identifiers are quoted model table names, values are parameters
            params: list[Any] = []
            for message_id, _conv, new, name, old, old_counter, _delta in chunk:
                params.extend((message_id, new, name, old, old_counter))
            params.append(tenant_id)
            cursor.execute(sql, params)
            done.extend(row[0] for row in cursor.fetchall())
    return done


def _apply_generic(tenant_id: int, updates: list[Update]) -> list[int]:  # pragma: no cover
    objects = [
        Message(pk=u[0], tenant_id=tenant_id, token_count=u[2], token_counter=u[3]) for u in updates
    ]
    with tenant_scope(tenant_id):
        Message.objects.bulk_update(objects, ["token_count", "token_counter"], batch_size=1000)
    return [u[0] for u in updates]


def _add_history_tokens(tenant_id: int, deltas: dict[int, int]) -> None:
    table = _quote(Conversation._meta.db_table)
    ids = sorted(deltas)
    amounts = [deltas[c] for c in ids]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Lock in id order: concurrent writers (and message_create) never deadlock.
            cursor.execute(
                f"SELECT id FROM {table} WHERE id = ANY(%s) AND tenant_id = %s "  # noqa: S608
                "ORDER BY id FOR UPDATE",
                [ids, tenant_id],
            )
            cursor.execute(
                f"""
                UPDATE {table} AS c SET history_tokens = GREATEST(c.history_tokens + v.delta, 0)
                FROM unnest(%s::bigint[], %s::bigint[]) AS v(id, delta)
                WHERE c.id = v.id AND c.tenant_id = %s
                """,  # noqa: S608 - quoted table name; values are parameters
                [ids, amounts, tenant_id],
            )
            return
        for start in range(0, len(ids), SQLITE_ROWS_PER_STATEMENT):
            chunk_ids = ids[start : start + SQLITE_ROWS_PER_STATEMENT]
            values = ", ".join(["(%s, %s)"] * len(chunk_ids))
            params: list[Any] = []
            for conversation_id in chunk_ids:
                params.extend((conversation_id, deltas[conversation_id]))
            params.append(tenant_id)
            cursor.execute(
                f"""
                WITH v(id, delta) AS (VALUES {values})
                UPDATE {table} SET history_tokens = max({table}.history_tokens + v.delta, 0)
                FROM v WHERE {table}.id = v.id AND {table}.tenant_id = %s
                """,  # noqa: S608 - quoted table name; values are parameters
                params,
            )


class _Deadline(Exception):
    pass


class _Writers:
    """Threads that apply batches on their own database connections while the caller reads
    and counts the next batch (PostgreSQL spends most of a batch's time maintaining indexes,
    so overlapping that with the Python side, and running a few writers, multiplies the
    throughput). Each thread closes its connection when the pool is closed."""

    def __init__(self, workers: int) -> None:
        self.jobs: queue.Queue[tuple[Future[int], Callable[[], int]] | None] = queue.Queue()
        self.threads = [
            threading.Thread(target=self._loop, name=f"backfill-writer-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self.threads:
            thread.start()

    def _loop(self) -> None:
        try:
            while True:
                job = self.jobs.get()
                if job is None:
                    return
                future, work = job
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    future.set_result(work())
                except BaseException as exc:  # handed to the caller through the future
                    future.set_exception(exc)
        finally:
            db_connections.close_all()

    def submit(self, work: Callable[[], int]) -> Future[int]:
        future: Future[int] = Future()
        self.jobs.put((future, work))
        return future

    def close(self) -> None:
        for _ in self.threads:
            self.jobs.put(None)
        for thread in self.threads:
            thread.join()


@dataclass
class _Run:
    tenant_id: int
    targets: Targets
    batch_size: int
    deadline: float | None
    on_batch: ProgressCallback | None
    stats: BackfillStats
    writers: _Writers | None = None
    in_flight: int = 1

    def _read(self, condition: Q, after: int) -> list[Row]:
        with tenant_scope(self.tenant_id):
            queryset = (
                Message.objects.filter(condition, pk__gt=after)
                .exclude(status=Status.STREAMING)
                .order_by("pk")
                .values_list(*ROW_FIELDS)
            )
            return list(queryset[: self.batch_size])

    def _write(self, updates: list[Update]) -> int:
        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    # An idempotent backfill can lose its last batches in a crash: no need to
                    # wait for each commit's WAL flush.
                    cursor.execute("SET LOCAL synchronous_commit TO OFF")
            return _apply(self.tenant_id, updates)

    def _settle(self, scanned: int, updated: int) -> None:
        self.stats.batches += 1
        self.stats.scanned += scanned
        self.stats.updated += updated
        if self.on_batch is not None:
            self.on_batch(scanned, updated)

    def keyset(
        self,
        condition: Q,
        *,
        after_id: int,
        on_cursor: Callable[[int], None] | None = None,
    ) -> None:
        """Walk the rows matching ``condition`` by id, a batch at a time. ``on_cursor`` gets
        the last id of every batch once it and all batches before it are committed."""
        last = after_id
        pending: deque[tuple[Future[int], int, int]] = deque()

        def finish_oldest() -> None:
            future, last_id, scanned = pending.popleft()
            self._settle(scanned, future.result())
            if on_cursor is not None:
                on_cursor(last_id)

        try:
            while True:
                if self.deadline is not None and time.monotonic() > self.deadline:
                    raise _Deadline
                rows = self._read(condition, last)
                if not rows:
                    return
                last = rows[-1][0]
                updates = _plan(rows, self.targets)
                if self.writers is None:
                    self._settle(len(rows), self._write(updates))
                    if on_cursor is not None:
                        on_cursor(last)
                else:
                    while len(pending) >= self.in_flight:
                        finish_oldest()
                    pending.append(
                        (self.writers.submit(partial(self._write, updates)), last, len(rows))
                    )
                if len(rows) < self.batch_size:
                    return
        finally:
            while pending:  # let submitted batches finish (or fail) before leaving
                finish_oldest()


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
    pool = _Writers(workers) if workers > 0 and connection.vendor == "postgresql" else None
    run = _Run(tenant.pk, targets, batch_size, deadline, on_batch, stats, pool, workers + 1)
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
    except _Deadline:
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
    from chatplatform.policies import policy_for

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
    updates = _plan(rows, Targets(default=counter, overrides={}))
    with transaction.atomic():
        updated = _apply(tenant_id, updates)
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
