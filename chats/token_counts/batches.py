"""Walking a tenant's messages in batches, keyset by id, and writing each batch.

- **Batched, keyset by id**: ``WHERE tenant_id = T AND id > last ... ORDER BY id LIMIT n``,
  never OFFSET; each batch is one read, then one transaction of bulk updates
  (:func:`~chats.token_counts.updates.apply_updates`). Messages still streaming are skipped
  (``message_finish`` counts them).
- **Fast on PostgreSQL**: most of a batch's time is the database maintaining the message
  indexes (a non-HOT update touches every index, the full-text GIN one included), so with
  writers the batches are written by threads on their own connections while the caller
  reads and counts the next one; commits skip the WAL flush wait (``synchronous_commit``
  off for these transactions: a crash can only lose batches the next run redoes).
- **Bounded in time**: past its deadline a walk raises :class:`DeadlineReached` before
  reading another batch; the batches already submitted finish first.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial

from django.db import connection, transaction
from django.db import connections as db_connections
from django.db.models import Q

from chatplatform.models.conversations import Message, Status
from chatplatform.tenancy.scoping import tenant_scope
from chats.token_counts.targets import Targets
from chats.token_counts.updates import ROW_FIELDS, Row, Update, apply_updates, plan_updates

ProgressCallback = Callable[[int, int], None]  # (rows scanned, rows updated) of a batch


@dataclass
class BackfillStats:
    """What a run did, summed over its tenants and batches (a job's result, a command's
    report)."""

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


class DeadlineReached(Exception):
    """The run's time budget is spent; the next run resumes where the work is."""


class WriterPool:
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
class KeysetRun:
    """One tenant's walk over its messages, a batch at a time, counted with ``targets``;
    with ``writers`` the batches are written in those threads, at most ``in_flight`` at a
    time, while this thread reads and counts the next one."""

    tenant_id: int
    targets: Targets
    batch_size: int
    deadline: float | None
    on_batch: ProgressCallback | None
    stats: BackfillStats
    writers: WriterPool | None = None
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
            return apply_updates(self.tenant_id, updates)

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
                    raise DeadlineReached
                rows = self._read(condition, last)
                if not rows:
                    return
                last = rows[-1][0]
                updates = plan_updates(rows, self.targets)
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
