"""Entry pages: the start page and the health check."""

from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse

from chats.ui.selectors import conversations_of
from chats.ui.views._common import current_tenant, page


def home(request: HttpRequest) -> HttpResponse:
    """Anonymous visitors get the log-in page; members get their tenant's start page (recent
    conversations); users of no tenant are told so."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())

    tenant = current_tenant(request)
    recent = conversations_of(tenant, request.user, limit=5) if tenant is not None else []
    return page(request, "home.html", {"recent": recent})


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
