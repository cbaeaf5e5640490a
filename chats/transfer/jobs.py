"""The imports and exports users and tenant admins ask for: each a :class:`Transfer` row and
a background job (:mod:`chats.transfer.tasks`) that runs it and reports its progress.

An import's job reads the uploaded file, then stores it in one transaction
(:mod:`chats.transfer.conversation_import`): its progress while it stores goes to the cache
(the row's changes are not visible before the commit), the row says when it is done. An
export's job writes its file to the private storage and records until when the link works."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from chatplatform.core.transfer.formats import READERS
from chatplatform.models import Tenant, Transfer, TransferFormat, TransferKind, TransferStatus
from chatplatform.tenancy.scoping import tenant_scope
from chats.transfer.files import file_remove, file_save, link_seconds

logger = logging.getLogger(__name__)

#: Transfers listed on the Account page.
LISTED = 10
EXPORT_FORMATS = (TransferFormat.CLAUDE, TransferFormat.MARKDOWN)


class TransferRejected(ValueError):
    """A transfer that cannot start (unknown format, file too large); nothing was stored."""


def progress_key(transfer: Transfer) -> str:
    return f"transfer:t{transfer.tenant_id}:x{transfer.pk}:progress"


def transfer_import_start(tenant: Tenant, user: Any, format_name: str, raw: bytes) -> Transfer:
    """Keep the uploaded export in the private storage and queue its import (after commit)."""
    if format_name not in READERS:
        raise TransferRejected(f"Unknown format {format_name[:40]!r}.")
    limit = int(settings.TRANSFER_IMPORT_MAX_BYTES)
    if len(raw) > limit:
        raise TransferRejected(f"The file is larger than {limit:,} bytes.")
    if not raw.strip():
        raise TransferRejected("The file is empty.")
    name = file_save(tenant.pk, "imports", raw, "upload")
    with tenant_scope(tenant):
        transfer = Transfer.objects.create(
            tenant=tenant, user=user, kind=TransferKind.IMPORT, format=format_name, file=name
        )
    _queue(transfer)
    return transfer


def transfer_export_start(
    tenant: Tenant, user: Any, format_name: str, *, whole_tenant: bool = False
) -> Transfer:
    """Queue an export of ``user``'s conversations (or, for a tenant admin, the tenant's)."""
    if format_name not in EXPORT_FORMATS:
        raise TransferRejected(f"Unknown export format {format_name[:40]!r}.")
    kind = TransferKind.TENANT_EXPORT if whole_tenant else TransferKind.EXPORT
    with tenant_scope(tenant):
        transfer = Transfer.objects.create(tenant=tenant, user=user, kind=kind, format=format_name)
    _queue(transfer)
    return transfer


def _queue(transfer: Transfer) -> None:
    from chats.transfer.tasks import run_transfer

    tenant_id, transfer_id = transfer.tenant_id, transfer.pk

    def dispatch() -> None:
        try:
            run_transfer.delay(tenant_id, transfer_id)
        except Exception:
            logger.exception("could not queue transfer %s", transfer_id)
            transfer_fail(tenant_id, transfer_id, "The job could not be queued; try again.")

    transaction.on_commit(dispatch)


def transfer_progress(transfer: Transfer, done: int, total: int) -> None:
    cache.set(progress_key(transfer), [done, total], timeout=3600)


def transfer_running(transfer: Transfer, total: int = 0) -> None:
    with tenant_scope(transfer.tenant_id):
        Transfer.objects.filter(pk=transfer.pk).update(status=TransferStatus.RUNNING, total=total)
    transfer.status, transfer.total = TransferStatus.RUNNING, total


def transfer_done(transfer: Transfer, result: dict[str, int], *, file: str | None = None) -> None:
    now = timezone.now()
    fields: dict[str, Any] = {
        "status": TransferStatus.DONE,
        "result": result,
        "done": result.get("conversations", 0),
        "finished_at": now,
    }
    if transfer.kind == TransferKind.IMPORT:
        fields["done"] = transfer.total
        fields["file"] = ""  # the upload is removed once it is imported
    if file is not None:
        fields["file"] = file
        fields["expires_at"] = now + timedelta(seconds=link_seconds())
    with tenant_scope(transfer.tenant_id):
        Transfer.objects.filter(pk=transfer.pk).update(**fields)
    cache.delete(progress_key(transfer))


def transfer_fail(tenant_id: int, transfer_id: int, error: str) -> None:
    with tenant_scope(tenant_id):
        Transfer.objects.filter(pk=transfer_id).update(
            status=TransferStatus.FAILED, error=error[:2000], finished_at=timezone.now()
        )


def transfers_of(tenant: Tenant, user: Any) -> list[Transfer]:
    """The user's latest imports and exports in the tenant, with their progress."""
    with tenant_scope(tenant):
        rows = list(
            Transfer.objects.filter(user=user, kind__in=[TransferKind.IMPORT, TransferKind.EXPORT])[
                :LISTED
            ]
        )
    for row in rows:
        _with_progress(row)
    return rows


def tenant_exports(tenant: Tenant) -> list[Transfer]:
    with tenant_scope(tenant):
        rows = list(Transfer.objects.filter(kind=TransferKind.TENANT_EXPORT)[:LISTED])
    for row in rows:
        _with_progress(row)
    return rows


def _with_progress(row: Transfer) -> None:
    if row.status == TransferStatus.RUNNING:
        found = cache.get(progress_key(row))
        if found:
            row.done, row.total = int(found[0]), int(found[1])


def transfer_get(tenant_id: int, transfer_id: int, user: Any, *, admin: bool) -> Transfer | None:
    """The transfer if ``user`` may see it: their own, or a tenant export for the tenant's
    admin; None otherwise (missing, another user's, another tenant's alike)."""
    with tenant_scope(tenant_id):
        row = Transfer.objects.filter(pk=transfer_id).first()
    if row is None:
        return None
    if row.kind == TransferKind.TENANT_EXPORT:
        return row if admin else None
    if row.user_id != getattr(user, "pk", None):
        return None
    _with_progress(row)
    return row


def transfers_expire(tenant_id: int, now: Any = None) -> int:
    """Remove the files of the tenant's exports whose link has expired; returns how many.
    Idempotent."""
    now = now or timezone.now()
    with tenant_scope(tenant_id):
        expired = list(
            Transfer.objects.filter(expires_at__lt=now).exclude(file="").values_list("pk", "file")
        )
    for pk, name in expired:
        try:
            file_remove(name)
        except OSError:
            logger.warning("could not remove the export file %s", name)
            continue
        with tenant_scope(tenant_id):
            Transfer.objects.filter(pk=pk).update(file="")
    return len(expired)
