"""The tenant switcher: a user of several tenants picks the one they work in."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from chatplatform.middleware import SESSION_TENANT_KEY
from chatplatform.selectors import memberships_of
from chats.ui.forms import TenantSwitchForm


@require_POST
@login_required
def tenant_switch(request: HttpRequest) -> HttpResponse:
    """Store the chosen tenant in the session after checking the membership; a tenant the
    user does not belong to is not found, exactly like one that does not exist. Lands on the
    new tenant's chat list (the previous tenant's objects are not found in it)."""
    form = TenantSwitchForm(request.POST)
    if not form.is_valid():
        raise Http404("No such tenant.")
    tenant_id = form.cleaned_data["tenant_id"]
    if not any(m.tenant_id == tenant_id for m in memberships_of(request.user)):
        raise Http404("No such tenant.")
    request.session[SESSION_TENANT_KEY] = tenant_id
    return redirect("chats_ui:conversation_list")
