"""The ids an export gives conversations and messages, and how an import recognises them:
what makes importing the same file twice, or the platform's own export back into the same
account, add nothing.

- A conversation imported from an export keeps the export's id (``Conversation.source_id``);
  one started here is exported as ``cp-<tenant>-c<id>``, which an import into the same account
  recognises as that conversation.
- A message imported keeps the export's id in its client id, ``import:<format>:<id>`` (an id
  too long for the column goes as a digest); one written here is exported as
  ``cp-<tenant>-m<id>``."""

from __future__ import annotations

import hashlib
import re

from chatplatform.models.conversations import Conversation, Message

CLIENT_ID_PREFIX = "import"
#: The longest export id kept as it is in a client id (64 characters in all).
KEPT_ID_CHARS = 48
PLATFORM_CONVERSATION = re.compile(r"^cp-(?P<tenant>\d+)-c(?P<pk>\d+)$")


def message_key(source_id: str) -> str:
    """The part of an imported message's client id that names it in its export."""
    if len(source_id) <= KEPT_ID_CHARS and ":" not in source_id:
        return source_id
    return "h" + hashlib.sha256(source_id.encode()).hexdigest()[:40]


def message_client_id(format_name: str, source_id: str) -> str:
    return f"{CLIENT_ID_PREFIX}:{format_name}:{message_key(source_id)}"


def stored_message_key(message: Message) -> str:
    """What names a stored message in an export (and in an import that meets it again)."""
    client_id = message.client_id or ""
    if client_id.startswith(f"{CLIENT_ID_PREFIX}:") and client_id.count(":") >= 2:
        return client_id.split(":", 2)[2]
    return f"cp-{message.tenant_id}-m{message.pk}"


def conversation_key(conversation: Conversation) -> str:
    """What names a conversation in an export."""
    return conversation.source_id or f"cp-{conversation.tenant_id}-c{conversation.pk}"


def platform_conversation_id(source_id: str, tenant_id: int) -> int | None:
    """The id of this tenant's conversation that the platform exported as ``source_id``."""
    found = PLATFORM_CONVERSATION.match(source_id)
    if found is None or int(found["tenant"]) != tenant_id:
        return None
    return int(found["pk"])
