"""What the sidebar does to a conversation: start a new chat, rename, archive and restore,
delete (its creator or a tenant admin) or leave (everyone else). POST only; each answers
with a redirect and a flash message."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from chatplatform.selectors import administered_tenant_ids
from chats.services.conversations import (
    ConversationRejected,
    conversation_archive,
    conversation_delete,
    conversation_leave,
    conversation_rename,
    conversation_start,
    conversation_unarchive,
)
from chats.ui.forms import ConversationRenameForm
from chats.ui.views._common import conversation_or_404, tenant_member_required, tenant_of


def _back(request: HttpRequest, default: str) -> HttpResponse:
    """To the page the form was on (``next``, a path of this site), else ``default``."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(target)
    return redirect(default)


def _detail(conversation_id: int) -> str:
    return reverse("chats_ui:conversation_detail", args=[conversation_id])


@require_POST
@tenant_member_required
def conversation_start_view(request: HttpRequest) -> HttpResponse:
    conversation = conversation_start(tenant=tenant_of(request), user=request.user)
    return redirect(_detail(conversation.pk))


@require_POST
@tenant_member_required
def conversation_rename_view(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = conversation_or_404(request, conversation_id)
    form = ConversationRenameForm(request.POST)
    if form.is_valid():
        conversation_rename(conversation, title=form.cleaned_data["title"])
        messages.success(request, "Renamed.")
    else:
        messages.error(request, "A title has at most 200 characters; nothing was changed.")
    return _back(request, _detail(conversation.pk))


@require_POST
@tenant_member_required
def conversation_archive_view(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = conversation_or_404(request, conversation_id)
    conversation_archive(conversation)
    messages.success(request, f"“{conversation}” is archived: find it under Archived.")
    return _back(request, _detail(conversation.pk))


@require_POST
@tenant_member_required
def conversation_unarchive_view(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = conversation_or_404(request, conversation_id)
    conversation_unarchive(conversation)
    messages.success(request, f"“{conversation}” is back in your conversations.")
    return _back(request, _detail(conversation.pk))


@require_POST
@tenant_member_required
def conversation_delete_view(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = conversation_or_404(request, conversation_id)
    name = str(conversation)
    admin = conversation.tenant_id in administered_tenant_ids(request.user)
    try:
        conversation_delete(conversation, by=request.user, admin=admin)
    except ConversationRejected as exc:
        messages.error(request, f"{exc.message} You can leave it instead.")
        return redirect(_detail(conversation.pk))
    messages.success(request, f"“{name}” was deleted.")
    return redirect("chats_ui:conversation_list")


@require_POST
@tenant_member_required
def conversation_leave_view(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = conversation_or_404(request, conversation_id)
    name = str(conversation)
    conversation_leave(conversation, user=request.user)
    messages.success(request, f"You left “{name}”.")
    return redirect("chats_ui:conversation_list")
