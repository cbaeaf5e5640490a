"""Serving the image stored with a message: the one response the web UI and the REST API
both give, once they have found the message in a conversation the requester may read."""

from __future__ import annotations

from django.db.models.fields.files import FieldFile
from django.http import FileResponse


def image_response(attachment: FieldFile, media_type: str, message_id: int) -> FileResponse:
    """The stored file as an inline image of its checked type, cached only by the browser
    (it is private to the conversation's members)."""
    handle = attachment.open("rb")
    extension = media_type.split("/")[-1].replace("jpeg", "jpg")
    response = FileResponse(handle, content_type=media_type)
    response["Content-Disposition"] = f'inline; filename="image-{message_id}.{extension}"'
    response["Cache-Control"] = "private, max-age=3600"
    response["X-Content-Type-Options"] = "nosniff"
    return response
