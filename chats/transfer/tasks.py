"""The jobs of imports and exports (thin adapters over :mod:`chats.transfer.jobs`), and the
beat job that removes exports whose link has expired. Registered with the chats app's tasks
(``chats.tasks``)."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from chatplatform.audit import audit_record
from chatplatform.core.transfer.records import TransferFormatError
from chatplatform.jobs import task_options
from chatplatform.models import AuditAction, Tenant, Transfer, TransferKind, TransferStatus
from chatplatform.tenancy.scoping import tenant_scope
from chats.services.messages import MessageRejected
from chats.transfer import jobs
from chats.transfer.conversation_export import (
    export_bytes,
    exported_conversation_ids,
    exported_conversations,
)
from chats.transfer.conversation_import import conversations_import_file
from chats.transfer.files import file_remove, file_save, transfer_storage

logger = logging.getLogger(__name__)

TRANSFER_SOFT_LIMIT, TRANSFER_HARD_LIMIT = 180, 240
EXPIRE_SOFT_LIMIT, EXPIRE_HARD_LIMIT = 120, 150


@shared_task(
    name="chats.tasks.run_transfer",
    soft_time_limit=TRANSFER_SOFT_LIMIT,
    time_limit=TRANSFER_HARD_LIMIT,
    **task_options(),
)
def run_transfer(tenant_id: int, transfer_id: int) -> str:
    """Run a queued import or export (``chats.transfer.jobs``); returns its status.
    Idempotent: a transfer that is done or failed is left alone, and an import run again
    adds nothing it added before."""
    with tenant_scope(tenant_id):
        transfer = Transfer.objects.select_related("tenant", "user").filter(pk=transfer_id).first()
    if transfer is None or transfer.status in (TransferStatus.DONE, TransferStatus.FAILED):
        return transfer.status if transfer else "missing"
    if transfer.kind == TransferKind.IMPORT:
        _import(transfer)
    else:
        _export(transfer)
    return TransferStatus.DONE


def _import(transfer: Transfer) -> None:
    try:
        with transfer_storage().open(transfer.file, "rb") as handle:
            raw = handle.read()
    except OSError:
        jobs.transfer_fail(transfer.tenant_id, transfer.pk, "The uploaded file is gone.")
        return
    jobs.transfer_running(transfer)
    try:
        result = conversations_import_file(
            transfer.tenant,
            transfer.user,
            transfer.format,
            raw,
            max_bytes=int(settings.TRANSFER_IMPORT_MAX_BYTES),
            progress=lambda done, total: jobs.transfer_progress(transfer, done, total),
        )
    except (TransferFormatError, MessageRejected) as exc:
        jobs.transfer_fail(transfer.tenant_id, transfer.pk, f"{exc} Nothing was imported.")
        file_remove(transfer.file)
        return
    except SoftTimeLimitExceeded:
        # Ended for good (run again, it would end the same way): the transaction rolled back.
        jobs.transfer_fail(
            transfer.tenant_id,
            transfer.pk,
            "The import took longer than a job may run; nothing was imported. Import the "
            "conversations in smaller files.",
        )
        file_remove(transfer.file)
        return
    jobs.transfer_done(transfer, result.as_dict())
    file_remove(transfer.file)


def _export(transfer: Transfer) -> None:
    whole = transfer.kind == TransferKind.TENANT_EXPORT
    ids = exported_conversation_ids(transfer.tenant_id, None if whole else transfer.user)
    jobs.transfer_running(transfer, total=len(ids))
    records = exported_conversations(
        transfer.tenant_id, ids, lambda done, total: jobs.transfer_progress(transfer, done, total)
    )
    data, counts = export_bytes(records, transfer.format)
    extension = "zip" if transfer.format == "markdown" else "json"
    name = file_save(transfer.tenant_id, "exports", data, extension)
    jobs.transfer_done(transfer, counts, file=name)
    if whole:
        audit_record(
            AuditAction.TENANT_EXPORTED,
            tenant_id=transfer.tenant_id,
            actor=transfer.user,
            target=transfer,
            changes={"conversations": [None, counts["conversations"]]},
        )


@shared_task(
    name="chats.tasks.remove_expired_exports",
    soft_time_limit=EXPIRE_SOFT_LIMIT,
    time_limit=EXPIRE_HARD_LIMIT,
    **task_options(),
)
def remove_expired_exports() -> int:
    """Beat, hourly: remove the files of exports whose download link expired, in every
    tenant (each in its own scope); returns how many. Idempotent."""
    return sum(
        jobs.transfers_expire(pk)
        for pk in Tenant.objects.order_by("pk").values_list("pk", flat=True)
    )
