"""The context meter's data: the stored record of one turn, as JSON."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from chats.ui.meter import meter_payload
from chats.ui.selectors import turn_record_for
from chats.ui.views._common import (
    MAX_ID,
    conversation_or_404,
    int_param,
    tenant_member_required,
)


@tenant_member_required
def turn_meter(request: HttpRequest, conversation_id: int) -> JsonResponse:
    """``?message=<id>``: the turn answering (or answered by) that message; else the newest.
    ``{"meter": null}`` while the conversation has no turn (or not that one: also for an id
    that is not a number or out of range)."""
    conversation = conversation_or_404(request, conversation_id)
    message_id = int_param(request, "message")
    if "message" in request.GET and (message_id is None or not 0 < message_id <= MAX_ID):
        return JsonResponse({"meter": None})  # no message has that id
    record = turn_record_for(conversation, message_id=message_id)
    return JsonResponse({"meter": meter_payload(record) if record is not None else None})
