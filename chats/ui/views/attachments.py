"""The image attached to a message, for the people in its conversation. Images arrive with
the message itself (the WebSocket message frame, or the REST API), checked by their own
header; this view only serves what was stored."""

from __future__ import annotations

from django.http import FileResponse, Http404, HttpRequest

from chats.image_files import image_response
from chats.selectors import message_with_image
from chats.ui.views._common import conversation_or_404, tenant_member_required


@tenant_member_required
def message_image(request: HttpRequest, conversation_id: int, message_id: int) -> FileResponse:
    """The image of a message; the same 404 for a missing message, one without an image and
    another tenant's or another conversation's."""
    conversation = conversation_or_404(request, conversation_id)
    message = message_with_image(conversation, message_id)
    if message is None:
        raise Http404("No such image.")
    return image_response(message.attachment, message.attachment_type, message.pk)
