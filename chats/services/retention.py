"""Deleting conversations, by their owner or by the tenant's retention
(``Tenant.retention_days``): the one removal path.

A conversation goes with its messages, summaries, vectors and fingerprints (the database's
cascade) and its images (files removed after the commit). Its turn records stay, emptied of
what pointed into it (the conversation, the message, the lists of what the prompt held), so
the usage reports keep every cost figure and whose turn it was."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import partial

from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from chatplatform.models import Tenant
from chatplatform.models.conversations import Conversation, Message, TurnRecord
from chatplatform.tenancy.scoping import tenant_scope

logger = logging.getLogger(__name__)

#: Conversations deleted per transaction by the retention job.
RETENTION_BATCH = 100


def _files_remove(names: list[str]) -> None:
    for name in names:
        try:
            default_storage.delete(name)
        except OSError:
            logger.warning("could not remove the image file %s", name)


def files_remove_after_commit(names: list[str]) -> None:
    """Remove these image files once the caller's transaction commits (never before: a
    rolled-back deletion keeps its files)."""
    if names:
        transaction.on_commit(partial(_files_remove, names))


def conversations_remove(tenant_id: int, conversation_ids: Iterable[int]) -> int:
    """Delete these conversations of the tenant (see the module); returns how many were."""
    ids = list(conversation_ids)
    if not ids:
        return 0
    with tenant_scope(tenant_id), transaction.atomic():
        files = [
            str(name)
            for name in Message.objects.filter(conversation_id__in=ids)
            .exclude(attachment="")
            .exclude(attachment__isnull=True)
            .values_list("attachment", flat=True)
        ]
        TurnRecord.objects.filter(conversation_id__in=ids).update(included=[], excluded=[])
        _, by_model = Conversation.objects.filter(pk__in=ids, tenant_id=tenant_id).delete()
        files_remove_after_commit(files)
    return int(by_model.get(Conversation._meta.label, 0))


def conversations_expire(tenant: Tenant, *, now: datetime | None = None) -> int:
    """Delete the tenant's conversations nobody has written in for its ``retention_days``
    (none when it keeps them), in batches; returns how many. Idempotent."""
    if not tenant.retention_days:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=tenant.retention_days)
    removed = 0
    while True:
        with tenant_scope(tenant):
            batch = list(
                Conversation.objects.filter(updated_at__lt=cutoff)
                .order_by("updated_at")
                .values_list("pk", flat=True)[:RETENTION_BATCH]
            )
        if not batch:
            return removed
        removed += conversations_remove(tenant.pk, batch)
