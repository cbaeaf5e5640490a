"""The summaries of a conversation, each linking to the messages it covers."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from chats.ui.views._common import conversation_or_404, page, tenant_member_required
from summaries.selectors import summaries_for


@tenant_member_required
def conversation_summaries(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = conversation_or_404(request, conversation_id)
    include_history = request.GET.get("history") == "1"
    return page(
        request,
        "chats/summaries.html",
        {
            "conversation": conversation,
            "summaries": summaries_for(conversation, include_history=include_history),
            "include_history": include_history,
        },
    )
