"""Entry pages: the start page, the health check and the site's icon."""

from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.db import connection
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.templatetags.static import static
from django.views.decorators.http import require_safe

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


@require_safe
def favicon(request: HttpRequest) -> HttpResponseRedirect:
    """/favicon.ico, which browsers ask for on their own: the site's icon (an SVG, which the
    pages also link). A temporary redirect: the icon's static name changes with its content."""
    return HttpResponseRedirect(static("favicon.svg"))
