"""An image in the WebSocket message frame: stored with its message, announced to the
conversation's other sockets (type and size, the bytes at the image URL); a bad one refused
with a clear error and nothing stored."""

from __future__ import annotations

import base64

import pytest
from channels.db import database_sync_to_async

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.consumers import MAX_FRAME_CHARS
from chats.images import MAX_IMAGE_BYTES
from tests.factories import PNG_1x1
from tests.replies.conftest import session_headers
from tests.replies.test_consumer import connect, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def user_messages(tenant, conversation) -> list[Message]:
    with tenant_scope(tenant):
        return list(Message.objects.filter(conversation=conversation, role="user"))


async def test_an_image_in_the_frame_is_stored_and_shown_to_the_other_sockets(
    conversation, member_a, tenant_a
):
    headers = await database_sync_to_async(session_headers)(member_a)
    sender, _, _ = await connect(conversation, headers)
    other, _, _ = await connect(conversation, headers)
    image = {"media_type": "image/png", "data": PNG_1x1}
    await sender.send_json_to({"type": "message", "client_id": "i1", "content": "", "image": image})
    sent = await receive_until(sender, "done")
    assert sent[0]["type"] == "ack" and sent[-1]["status"] == "complete"
    seen = [e for e in await receive_until(other, "done") if e["type"] == "message"]
    size = len(base64.b64decode(PNG_1x1))
    assert [e["image"] for e in seen] == [{"media_type": "image/png", "size": size}]
    [stored] = await database_sync_to_async(user_messages)(tenant_a, conversation)
    assert stored.content == "" and stored.attachment_bytes == size
    await sender.disconnect()
    await other.disconnect()


async def test_a_frame_has_room_for_the_largest_image_and_the_text():
    largest = len(base64.b64encode(b"\0" * MAX_IMAGE_BYTES)) + 1024 * 1024
    assert largest <= MAX_FRAME_CHARS


@pytest.mark.parametrize(
    ("image", "says"),
    [
        ({"media_type": "image/png", "data": base64.b64encode(b"%PDF-1.4").decode()}, "not a PNG"),
        ({"media_type": "image/gif", "data": PNG_1x1}, "it is image/png"),
        ({"media_type": "image/png", "data": "***"}, "base64"),
    ],
)
async def test_a_bad_image_is_refused_clearly_and_nothing_is_stored(
    conversation, member_a, tenant_a, image, says
):
    ws, _, _ = await connect(conversation, await database_sync_to_async(session_headers)(member_a))
    await ws.send_json_to({"type": "message", "client_id": "b1", "content": "Look", "image": image})
    error = await ws.receive_json_from(timeout=10)
    assert error["type"] == "error" and error["code"] == "invalid_image"
    assert error["client_id"] == "b1" and says in error["message"]
    assert await database_sync_to_async(user_messages)(tenant_a, conversation) == []
    await ws.disconnect()
