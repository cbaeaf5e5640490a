"""What follows an import once it is committed: the work a typed message gets after its
reply, for every conversation that received messages."""

from __future__ import annotations

import logging

from celery import shared_task

from chatplatform.core.memory.kinds import STANDING_KINDS
from chatplatform.jobs import task_options
from chatplatform.models.conversations import Conversation, Message, MessageRole
from chatplatform.tenancy.scoping import tenant_scope
from chats.retrieval.tasks import schedule_embedding
from memory.selectors import messages_with_memories
from memory.services import instructions_capture
from summaries.scheduling import schedule_summary_if_needed

logger = logging.getLogger(__name__)

IMPORT_FOLLOWUP_SOFT_LIMIT, IMPORT_FOLLOWUP_HARD_LIMIT = 120, 150


@shared_task(
    name="chats.tasks.process_imported_conversations",
    soft_time_limit=IMPORT_FOLLOWUP_SOFT_LIMIT,
    time_limit=IMPORT_FOLLOWUP_HARD_LIMIT,
    **task_options(),
)
def process_imported_conversations(tenant_id: int, conversation_ids: list[int]) -> int:
    """For each imported conversation of the tenant: the standing instructions and
    preferences its user messages state become their author's memories (as intake does for
    a typed message), its messages are queued for embedding (retrieval by meaning, when the
    policy uses it) and its rolling summary is brought up to date (when due). Idempotent: a
    message that gave a memory once is not read again, and the embedding and summary jobs
    do only what is missing. Returns how many conversations it handled."""
    handled = 0
    for conversation_id in conversation_ids:
        with tenant_scope(tenant_id):
            conversation = Conversation.objects.filter(pk=conversation_id).first()
        if conversation is None:
            continue  # deleted since
        memories_capture(conversation)
        schedule_embedding(conversation)
        try:
            schedule_summary_if_needed(conversation)
        except Exception:
            logger.exception("could not schedule a summary for conversation %s", conversation_id)
        handled += 1
    return handled


def memories_capture(conversation: Conversation) -> int:
    """Keep what the conversation's user messages state of how their authors want to be
    answered; returns how many memories were kept."""
    with tenant_scope(conversation.tenant_id):
        messages = list(
            Message.objects.filter(
                conversation_id=conversation.pk, role=MessageRole.USER, author__isnull=False
            ).order_by("seq")
        )
    noticed = messages_with_memories(
        conversation.tenant_id, [m.pk for m in messages], list(STANDING_KINDS)
    )
    kept = 0
    for message in messages:
        if message.pk in noticed:
            continue
        try:
            kept += len(instructions_capture(conversation.tenant_id, message))
        except Exception:
            logger.exception("keeping the instructions of message %s failed", message.pk)
    return kept
