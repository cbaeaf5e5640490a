"""The tenant admin's export of the whole tenant's conversations: a page of the tenant in the
admin that starts an export job (JSON in Claude's export shape, or Markdown) and lists the
tenant's exports with their download links. Only the tenant's own admins see it and download
(the link checks the admin role in the export's tenant); each export is audited."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from chatplatform.admin_base import _tenant_ids
from chatplatform.models import Tenant, TransferStatus
from chats.transfer.files import download_token
from chats.transfer.jobs import TransferRejected, tenant_exports, transfer_export_start


def tenant_exports_view(
    model_admin: Any, request: HttpRequest, tenant: Tenant | None
) -> HttpResponse:
    if tenant is None or tenant.pk not in _tenant_ids(request):
        raise Http404("No such tenant.")
    here = reverse("admin:chatplatform_tenant_exports", args=[tenant.pk])
    if request.method == "POST":
        try:
            transfer_export_start(
                tenant, request.user, request.POST.get("format", ""), whole_tenant=True
            )
        except TransferRejected as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, "The export has started; reload this page to see it.")
        return HttpResponseRedirect(here)
    now = timezone.now()
    rows = [
        (
            row,
            reverse("chats_ui:transfer_download", args=[download_token(row)])
            if row.status == TransferStatus.DONE
            and row.file
            and row.expires_at
            and row.expires_at > now
            else "",
        )
        for row in tenant_exports(tenant)
    ]
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Export the conversations of {tenant.name}",
        "opts": model_admin.opts,
        "original": tenant,
        "has_view_permission": True,
        "rows": rows,
    }
    return TemplateResponse(request, "admin/chatplatform/tenant/exports.html", context)
