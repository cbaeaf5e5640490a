"""What every UI view shares: log-in and tenant checks, the 404 for objects that are not the
user's, and the page context (the tenant switcher)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render

from chatplatform.models import Tenant
from chatplatform.models.conversations import Conversation
from chatplatform.selectors import memberships_of
from chats.selectors import conversation_for_member

View = Callable[..., HttpResponseBase]

#: The largest id a query parameter may name: ids are 64-bit integers in both databases, and a
#: larger number reaching a query is a database error instead of "not found".
MAX_ID = 2**62


def int_param(request: HttpRequest, name: str) -> int | None:
    """``?name=`` as an integer; None when it is absent or not a number."""
    try:
        return int(request.GET.get(name, ""))
    except ValueError:  # not a number, or more digits than int() accepts
        return None


def tenant_member_required(view: View) -> View:
    """Log-in required; a user with no tenant gets the "no tenant" page (403)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if current_tenant(request) is None:
            return page(request, "home.html", {}, status=403)
        return view(request, *args, **kwargs)

    return login_required(wrapper)


def current_tenant(request: HttpRequest) -> Tenant | None:
    return getattr(request, "tenant", None)


def tenant_of(request: HttpRequest) -> Tenant:
    tenant = current_tenant(request)
    if tenant is None:  # pragma: no cover - tenant_member_required ran first
        raise Http404
    return tenant


def conversation_or_404(request: HttpRequest, conversation_id: int) -> Conversation:
    """The conversation if the user takes part in it in their current tenant; the same 404
    for one that is missing, another tenant's or another user's."""
    conversation = conversation_for_member(
        request.user, conversation_id, tenant_id=tenant_of(request).pk
    )
    if conversation is None:
        raise Http404("No such conversation.")
    return conversation


def page(
    request: HttpRequest, template: str, context: dict[str, Any], *, status: int = 200
) -> HttpResponse:
    """Render a page with the context every page needs (tenant, tenant switcher)."""
    memberships = memberships_of(request.user) if request.user.is_authenticated else []
    base = {
        "tenant": current_tenant(request),
        "memberships": [m for m in memberships if m.user_id != m.tenant.service_user_id],
    }
    return render(request, template, {**base, **context}, status=status)
