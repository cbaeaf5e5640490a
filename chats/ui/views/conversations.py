"""The conversation list, new conversations, the chat view and its members."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from chatplatform.policies import policy_for
from chatplatform.selectors import administered_tenant_ids
from chats.images import ALLOWED_TYPES, MAX_IMAGE_BYTES
from chats.replies.commands import command_catalog
from chats.services import max_message_chars, participant_add
from chats.services.conversations import ConversationRejected, conversation_create
from chats.ui.forms import ConversationCreateForm, ParticipantAddForm, member_label
from chats.ui.selectors import (
    archived_count,
    conversation_header,
    message_window,
    participants_of,
    sidebar_rows,
    spending_shown,
)
from chats.ui.views._common import (
    conversation_or_404,
    int_param,
    page,
    tenant_member_required,
    tenant_of,
)
from summaries.scheduling import schedule_continuation_summary


def sidebar(request: HttpRequest, *, current: Any = None) -> dict[str, Any]:
    """The sidebar's context: the user's conversations (``?q=`` searches them, ``?archived=1``
    lists the archived ones), how many are archived, and the open conversation."""
    tenant = tenant_of(request)
    query = request.GET.get("q", "") if current is None else ""
    archived = current is None and request.GET.get("archived") == "1"
    return {
        "rows": sidebar_rows(tenant, request.user, query=query, archived=archived),
        "query": query,
        "showing_archived": archived,
        "archived_count": archived_count(tenant, request.user),
        "current": current,
        "here": request.get_full_path(),
        "spending": spending_shown(tenant, request.user),
    }


@tenant_member_required
def conversation_list(request: HttpRequest) -> HttpResponse:
    return page(request, "chats/conversation_list.html", sidebar(request))


@tenant_member_required
def conversation_new(request: HttpRequest) -> HttpResponse:
    tenant = tenant_of(request)
    form = ConversationCreateForm(request.POST or None, tenant=tenant, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            conversation = conversation_create(
                tenant=tenant,
                created_by=request.user,
                title=data["title"],
                participants=list(data["participants"]),
                continues=data["continues"],
                carry_over_summary=data["carry_over_summary"],
            )
        except ConversationRejected as exc:
            form.add_error("continues", exc.message)
        else:
            _schedule_carry_over(conversation)
            return redirect("chats_ui:conversation_detail", conversation_id=conversation.pk)
    return page(request, "chats/conversation_new.html", {"form": form})


def _schedule_carry_over(conversation: Any) -> None:
    """Make sure the continued conversation's summary exists (dispatched after commit)."""
    schedule_continuation_summary(conversation)


def _int_param(request: HttpRequest, name: str) -> int | None:
    value = int_param(request, name)
    return value if value is not None and value > 0 else None


@tenant_member_required
def conversation_detail(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = conversation_or_404(request, conversation_id)
    window = message_window(
        conversation,
        before_seq=_int_param(request, "before"),
        around_seq=_int_param(request, "around"),
    )
    participants = participants_of(conversation)
    policy = policy_for(conversation)
    chat_config = {
        "conversationId": conversation.pk,
        "wsPath": f"/ws/conversations/{conversation.pk}/",
        "meterUrl": reverse("chats_ui:turn_meter", args=[conversation.pk]),
        "imageUrl": _image_url_template(conversation.pk),
        "botName": policy.bot_name,
        "userLabel": _user_label(request.user),
        "maxChars": max_message_chars(policy),
        "maxAttachmentBytes": MAX_IMAGE_BYTES,
        "attachmentTypes": list(ALLOWED_TYPES),
        "isLatestWindow": window.later_after_seq is None,
        "commands": command_catalog(),
        "messageFitUrl": reverse("chats_ui:message_fit", args=[conversation.pk]),
        "versionsUrl": _message_url_template(conversation.pk, "chats_ui:message_versions"),
    }
    return page(
        request,
        "chats/conversation_detail.html",
        {
            "conversation": conversation,
            "window": window,
            "participants": participants,
            "member_form": ParticipantAddForm(tenant=tenant_of(request), current=participants),
            "chat_config": chat_config,
            "header": conversation_header(conversation, request.user),
            # A tenant admin may regenerate any member's reply; others only their own.
            "regenerates_any": conversation.tenant_id in administered_tenant_ids(request.user),
            **sidebar(request, current=conversation),
        },
    )


def _image_url_template(conversation_id: int) -> str:
    """The URL of a message's image with ``{id}`` for the message id: the page shows the
    images of messages that arrive on the socket (whose events carry no URL: API clients
    use the same socket)."""
    return _message_url_template(conversation_id, "chats_ui:message_image")


def _message_url_template(conversation_id: int, name: str) -> str:
    """The URL named ``name`` of a message of the conversation, ``{id}`` for its id."""
    url = reverse(name, args=[conversation_id, 1])
    return url.replace("/messages/1/", "/messages/{id}/")


def _user_label(user: Any) -> str:
    return str(user.get_full_name() or user.get_username())


@require_POST
@tenant_member_required
def participant_add_view(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = conversation_or_404(request, conversation_id)
    form = ParticipantAddForm(
        request.POST, tenant=tenant_of(request), current=participants_of(conversation)
    )
    if form.is_valid():
        participant_add(conversation=conversation, user=form.cleaned_data["user"])
        messages.success(request, f"{member_label(form.cleaned_data['user'])} was added.")
    else:
        messages.error(request, "Choose a member of your organisation who is not in it yet.")
    return redirect("chats_ui:conversation_detail", conversation_id=conversation.pk)
