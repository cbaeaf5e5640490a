from __future__ import annotations

import pytest

from chats.services import conversation_create, message_create


def add(conversation, author, *texts, role="user"):
    """Store messages; return them."""
    return [
        message_create(conversation=conversation, role=role, content=t, author=author)[0]
        for t in texts
    ]


@pytest.fixture
def conversation(tenant_a, member_a):
    return conversation_create(tenant=tenant_a, created_by=member_a, title="Chat A")
