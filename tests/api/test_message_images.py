"""A message with an image through the REST API: sent in the body (checked by its own header),
shown in the message's representation, served at its URL to the same tenant's participants
only (another tenant's image answers exactly like a missing one), and documented in the
schema."""

from __future__ import annotations

import base64

import pytest

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from tests.api.conftest import API, error_of
from tests.factories import PNG_1x1, make_message, png_image

pytestmark = pytest.mark.django_db(transaction=True)


def url(conversation) -> str:
    return f"{API}/conversations/{conversation.pk}/messages/"


def stored(conversation) -> list[Message]:
    with tenant_scope(conversation.tenant_id):
        return list(Message.objects.filter(conversation_id=conversation.pk).order_by("seq"))


def test_a_message_with_an_image_is_stored_and_served(client_a, conversation_a):
    body = {"content": "What is this?", "image": {"media_type": "image/png", "data": PNG_1x1}}
    response = client_a.post(url(conversation_a), body, format="json")
    assert response.status_code == 201, response.json()
    message = response.json()["message"]
    image_url = f"{url(conversation_a)}{message['id']}/image/"
    assert message["image"] == {
        "media_type": "image/png",
        "size": len(base64.b64decode(PNG_1x1)),
        "url": image_url,
    }
    assert response.json()["reply"]["image"] is None
    image = client_a.get(image_url)
    assert image.status_code == 200 and image["Content-Type"] == "image/png"
    assert b"".join(image.streaming_content) == base64.b64decode(PNG_1x1)
    listed = client_a.get(url(conversation_a)).json()["results"]
    assert listed[0]["image"]["url"] == image_url


def test_an_image_alone_is_a_message(client_a, conversation_a):
    body = {"content": "", "image": {"media_type": "image/png", "data": PNG_1x1}}
    response = client_a.post(url(conversation_a), body, format="json")
    assert response.status_code == 201, response.json()
    user_message = stored(conversation_a)[0]
    assert user_message.content == "" and user_message.attachment_type == "image/png"


@pytest.mark.parametrize(
    ("image", "field_error"),
    [
        ({"media_type": "image/png", "data": "not base64!"}, "base64"),
        ({"media_type": "image/png", "data": base64.b64encode(b"hello").decode()}, "not a PNG"),
        ({"media_type": "image/jpeg", "data": PNG_1x1}, "it is image/png"),
        ({"media_type": "image/svg+xml", "data": PNG_1x1}, "not a valid choice"),
        ("a string", "dictionary"),
    ],
)
def test_bad_images_are_refused_clearly_and_nothing_is_stored(
    client_a, conversation_a, image, field_error
):
    response = client_a.post(
        url(conversation_a), {"content": "Look", "image": image}, format="json"
    )
    error = error_of(response, 400)
    assert "image" in error["fields"], error
    assert field_error in str(error["fields"]["image"]), error
    assert stored(conversation_a) == []


def test_another_tenants_image_answers_like_a_missing_one(
    client_a, client_b, conversation_a, conversation_b, member_b
):
    theirs = make_message(conversation_b, "B's picture", author=member_b, image=png_image())
    own = client_a.get(f"{url(conversation_a)}{theirs.pk}/image/")
    direct = client_a.get(f"{url(conversation_b)}{theirs.pk}/image/")
    missing = client_a.get(f"{url(conversation_a)}987654/image/")
    errors = [error_of(answer, 404, "not_found") for answer in (own, direct, missing)]
    assert errors[0] == errors[2]  # a conversation of one's own: image "missing"
    assert errors[1]["message"] == "No such conversation."
    assert client_b.get(f"{url(conversation_b)}{theirs.pk}/image/").status_code == 200


def test_the_schema_documents_the_image(client, db):
    document = client.get(f"{API}/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    create = document["components"]["schemas"]["MessageCreateRequest"]["properties"]
    assert "image" in create
    shown = document["components"]["schemas"]["Message"]["properties"]
    assert "image" in shown
    path = "/api/v1/conversations/{conversation_id}/messages/{message_id}/image/"
    assert "image/*" in document["paths"][path]["get"]["responses"]["200"]["content"]
