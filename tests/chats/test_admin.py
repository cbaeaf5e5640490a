"""The chat models in the admin: messages come from the chat, so the admin cannot add one
(it would skip the sequence number, the token count and the reply)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create, message_create

pytestmark = pytest.mark.django_db


def test_the_admin_offers_no_message_add_and_refuses_one(client, admin_a, tenant_a, member_a):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="t")
    message, _ = message_create(
        conversation=conversation, role="user", content="hi", author=member_a
    )
    client.force_login(admin_a)
    changelist = client.get(reverse("admin:chatplatform_message_changelist"))
    assert changelist.status_code == 200
    add = reverse("admin:chatplatform_message_add")
    assert add not in changelist.content.decode()
    assert client.get(add).status_code == 403
    posted = client.post(
        add,
        {
            "tenant": tenant_a.pk,
            "conversation": conversation.pk,
            "role": "user",
            "status": "complete",
            "content": "planted",
        },
    )
    assert posted.status_code == 403
    with tenant_scope(tenant_a):
        assert list(Message.objects.values_list("content", flat=True)) == ["hi"]
    # Reading and editing a message stay possible.
    change = reverse("admin:chatplatform_message_change", args=[message.pk])
    assert client.get(change).status_code == 200
