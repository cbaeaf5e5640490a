"""The image of a message in the web UI: served to the people in its conversation, shown as a
thumbnail in the stored conversation, and the same 404 for everyone and everything else."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from chats.services import participant_add
from tests.factories import make_conversation, make_member, make_message, png_image

pytestmark = pytest.mark.django_db


def image_url(conversation, message) -> str:
    return reverse("chats_ui:message_image", args=[conversation.pk, message.pk])


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def with_image(conversation_a, member_a):
    return make_message(conversation_a, "What is this?", author=member_a, image=png_image())


def test_a_participant_gets_the_image_as_stored(member_client, conversation_a, with_image):
    response = member_client.get(image_url(conversation_a, with_image))
    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"
    assert b"".join(response.streaming_content) == png_image()[0]
    assert response["Cache-Control"] == "private, max-age=3600"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Disposition"].startswith("inline")


def test_another_participant_of_the_conversation_sees_it_too(tenant_a, conversation_a, with_image):
    colleague = make_member(tenant_a, username="colleague")
    participant_add(conversation=conversation_a, user=colleague)
    assert client_of(colleague).get(image_url(conversation_a, with_image)).status_code == 200


def test_the_conversation_shows_the_thumbnail_after_a_reload(
    member_client, conversation_a, with_image
):
    page = member_client.get(reverse("chats_ui:conversation_detail", args=[conversation_a.pk]))
    html = page.content.decode()
    url = image_url(conversation_a, with_image)
    assert f'<img src="{url}"' in html
    assert 'alt="Attached image (image/png, ' in html
    config = json.loads(html.split('id="chat-config" type="application/json">')[1].split("<")[0])
    assert config["imageUrl"].replace("{id}", str(with_image.pk)) == url
    assert config["maxAttachmentBytes"] == 5 * 1024 * 1024
    assert "attachmentUrl" not in config


def test_everyone_else_gets_the_same_404_as_for_a_missing_image(
    client, tenant_a, tenant_b, member_a, member_b, conversation_a, with_image
):
    """Another tenant's member, a member of the tenant outside the conversation, another
    tenant's image through one's own conversation, a message without image, a missing one."""
    outsider = make_member(tenant_a, username="outsider")
    theirs = make_conversation(tenant_b, member_b, "B")
    their_image = make_message(theirs, "B's picture", author=member_b, image=png_image())
    plain = make_message(conversation_a, "No picture", author=member_a)
    mine, b = client_of(member_a), client_of(member_b)
    own_b = make_conversation(tenant_b, member_b, "B's own")
    foreign = reverse("chats_ui:message_image", args=[conversation_a.pk, their_image.pk])
    missing = reverse("chats_ui:message_image", args=[conversation_a.pk, 987654])
    as_a = [
        mine.get(image_url(theirs, their_image)),  # another tenant's conversation
        mine.get(foreign),  # another tenant's image through one's own conversation
        mine.get(image_url(conversation_a, plain)),  # a message without an image
        mine.get(missing),
    ]
    as_b = [
        b.get(image_url(conversation_a, with_image)),
        b.get(reverse("chats_ui:message_image", args=[own_b.pk, with_image.pk])),
        b.get(reverse("chats_ui:message_image", args=[own_b.pk, 987654])),
    ]
    as_outsider = client_of(outsider).get(image_url(conversation_a, with_image))
    for answers in (as_a, as_b, [as_outsider]):
        assert [a.status_code for a in answers] == [404] * len(answers)
        assert len({a.content for a in answers}) == 1
        assert all(b"PNG" not in a.content for a in answers)


def test_logged_out_visitors_are_sent_to_log_in(client, conversation_a, with_image):
    response = client.get(image_url(conversation_a, with_image))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
