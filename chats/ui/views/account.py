"""The Account page: importing conversations from another service, exporting one's own,
downloading an export through its signed link, and deleting the account. Thin adapters
over ``chats.transfer``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from chatplatform.models import Membership, MembershipRole, Transfer, TransferKind, TransferStatus
from chatplatform.tenancy.scoping import tenant_scope
from chats.transfer.account_deletion import account_delete
from chats.transfer.files import download_token, export_file, token_transfer
from chats.transfer.jobs import (
    TransferRejected,
    transfer_export_start,
    transfer_get,
    transfer_import_start,
    transfers_of,
)
from chats.ui.forms import AccountDeleteForm, ExportForm, ImportForm
from chats.ui.views._common import page, tenant_member_required, tenant_of

#: A user without a password confirms the deletion within this long of logging in.
RECENT_LOGIN = timedelta(minutes=10)


@tenant_member_required
def account(request: HttpRequest) -> HttpResponse:
    tenant = tenant_of(request)
    rows = transfers_of(tenant, request.user)
    return page(
        request,
        "chats/account.html",
        {
            "transfers": [(row, _link(row)) for row in rows],
            "running": any(
                r.status in (TransferStatus.QUEUED, TransferStatus.RUNNING) for r in rows
            ),
            "import_form": ImportForm(),
            "export_form": ExportForm(),
            "delete_form": AccountDeleteForm(),
            "has_password": _user(request).has_usable_password(),
            "import_max_mb": int(settings.TRANSFER_IMPORT_MAX_BYTES) // (1024 * 1024),
            "link_hours": settings.TRANSFER_LINK_HOURS,
        },
    )


def _link(row: Transfer) -> str:
    if row.status != TransferStatus.DONE or not row.file or row.kind == TransferKind.IMPORT:
        return ""
    if row.expires_at and row.expires_at <= timezone.now():
        return ""
    return reverse("chats_ui:transfer_download", args=[download_token(row)])


@require_POST
@tenant_member_required
def account_import(request: HttpRequest) -> HttpResponse:
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, "Choose the service the export is from and its file.")
        return redirect("chats_ui:account")
    upload = form.cleaned_data["file"]
    limit = int(settings.TRANSFER_IMPORT_MAX_BYTES)
    if upload.size > limit:
        messages.error(request, f"The file is larger than {limit:,} bytes.")
        return redirect("chats_ui:account")
    try:
        transfer_import_start(
            tenant_of(request), request.user, form.cleaned_data["format"], upload.read()
        )
    except TransferRejected as exc:
        messages.error(request, str(exc))
        return redirect("chats_ui:account")
    messages.success(request, "The import has started: its progress shows below.")
    return redirect("chats_ui:account")


@require_POST
@tenant_member_required
def account_export(request: HttpRequest) -> HttpResponse:
    form = ExportForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose the export's format.")
        return redirect("chats_ui:account")
    transfer_export_start(tenant_of(request), request.user, form.cleaned_data["format"])
    messages.success(request, "The export has started: its download link shows below when done.")
    return redirect("chats_ui:account")


def transfer_download(request: HttpRequest, token: str) -> HttpResponseBase:
    """An export's file, for its owner (a tenant export: an admin of its tenant) while the
    link holds; the same 404 for a forged, expired, removed or someone else's link."""
    if not request.user.is_authenticated:
        return redirect(f"{settings.LOGIN_URL}?next={request.path}")
    named = token_transfer(token)
    if named is None:
        raise Http404("This download link is not valid or has expired.")
    tenant_id, transfer_id = named
    with tenant_scope(tenant_id):
        membership = Membership.objects.filter(user=request.user).first()
    if membership is None:
        raise Http404("This download link is not valid or has expired.")
    row = transfer_get(
        tenant_id, transfer_id, request.user, admin=membership.role == MembershipRole.ADMIN
    )
    opened = export_file(row) if row is not None else None
    if opened is None:
        raise Http404("This download link is not valid or has expired.")
    handle, filename = opened
    return FileResponse(handle, as_attachment=True, filename=filename)


@require_POST
@tenant_member_required
def account_delete_view(request: HttpRequest) -> HttpResponse:
    form = AccountDeleteForm(request.POST)
    user = _user(request)
    if not form.is_valid() or form.cleaned_data["confirm"] != user.get_username():
        messages.error(request, "Type your username exactly to confirm the deletion.")
        return redirect("chats_ui:account")
    if user.has_usable_password():
        if not user.check_password(form.cleaned_data["password"]):
            messages.error(request, "That is not your password: nothing was deleted.")
            return redirect("chats_ui:account")
    elif user.last_login is None or timezone.now() - user.last_login > RECENT_LOGIN:
        messages.error(request, "Log out and in again, then delete the account within ten minutes.")
        return redirect("chats_ui:account")
    account_delete(user)
    logout(request)
    return redirect(settings.LOGIN_URL)


def _user(request: HttpRequest) -> Any:
    """The logged-in user (the views' decorators let no one else in)."""
    return request.user
