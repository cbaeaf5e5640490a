"""Where imports and exports keep their files, and the links that download an export.

The files live in ``TRANSFER_ROOT``, a private folder the web server never serves: an
export is downloaded only through :func:`download_token`'s signed link, which names the
tenant and the transfer, expires after ``TRANSFER_LINK_HOURS`` and is honoured only for the
transfer's owner (a tenant export: an admin of that tenant)."""

from __future__ import annotations

import uuid
from typing import IO, Any

from django.conf import settings
from django.core import signing
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage
from django.utils import timezone

from chatplatform.models import Transfer, TransferKind, TransferStatus

SALT = "chats.transfer.download"


def transfer_storage() -> FileSystemStorage:
    """The private storage (no URL: nothing in it is served)."""
    return FileSystemStorage(location=str(settings.TRANSFER_ROOT), base_url=None)


def link_seconds() -> int:
    return int(float(settings.TRANSFER_LINK_HOURS) * 3600)


def file_save(tenant_id: int, folder: str, data: bytes, extension: str) -> str:
    """Store ``data`` under the tenant's folder; returns its name in the storage."""
    name = f"t{tenant_id}/{folder}/{uuid.uuid4().hex}.{extension}"
    return transfer_storage().save(name, ContentFile(data))


def file_remove(name: str) -> None:
    if name:
        transfer_storage().delete(name)


def download_token(transfer: Transfer) -> str:
    return signing.dumps({"t": transfer.tenant_id, "x": transfer.pk}, salt=SALT, compress=True)


def token_transfer(token: str) -> tuple[int, int] | None:
    """The (tenant id, transfer id) a link names, or None when it is forged or expired."""
    try:
        data = signing.loads(token, salt=SALT, max_age=link_seconds())
    except signing.BadSignature:  # SignatureExpired included
        return None
    if not isinstance(data, dict):
        return None
    tenant_id, transfer_id = data.get("t"), data.get("x")
    if not isinstance(tenant_id, int) or not isinstance(transfer_id, int):
        return None
    return tenant_id, transfer_id


def export_available(transfer: Transfer) -> bool:
    """An export whose file is written and whose link has not expired."""
    return bool(
        transfer.kind != TransferKind.IMPORT
        and transfer.status == TransferStatus.DONE
        and transfer.file
        and transfer.expires_at is not None
        and transfer.expires_at > timezone.now()
    )


def export_file(transfer: Transfer) -> tuple[IO[Any], str] | None:
    """The open file of an available export and the name it is downloaded as; None when it
    is not available (not done, expired, removed)."""
    if not export_available(transfer):
        return None
    try:
        handle = transfer_storage().open(transfer.file, "rb")
    except OSError:
        return None
    extension = transfer.file.rsplit(".", 1)[-1]
    return handle, f"conversations-{transfer.created_at:%Y%m%d}.{extension}"
