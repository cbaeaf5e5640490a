"""Image attachments: checked here as in the browser, then refused until the reply pipeline
can carry images (the WebSocket protocol has no attachment field yet)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST

from chats.ui.views._common import conversation_or_404, tenant_member_required
from chats.ui.views.conversations import ATTACHMENT_TYPES, MAX_ATTACHMENT_BYTES


@require_POST
@tenant_member_required
def attachment_upload(request: HttpRequest, conversation_id: int) -> JsonResponse:
    conversation_or_404(request, conversation_id)
    upload = request.FILES.get("image")
    if upload is None:
        return _error(400, "missing", "Choose an image to attach.")
    if upload.content_type not in ATTACHMENT_TYPES:
        return _error(415, "unsupported_type", "Attach a PNG, JPEG, GIF or WebP image.")
    if (upload.size or 0) > MAX_ATTACHMENT_BYTES:
        limit = MAX_ATTACHMENT_BYTES // (1024 * 1024)
        return _error(413, "too_large", f"The image is larger than {limit} MB.")
    return _error(
        501,
        "not_supported",
        "Image attachments are not supported yet; send the message without the image.",
    )


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)
