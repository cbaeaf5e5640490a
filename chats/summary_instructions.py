"""Standing instructions and preferences a summary found, kept as the users' own memories.

A model's summary of a span of messages lists the standing instructions and preferences users
gave in it, quoted verbatim (``instructions`` in the stored content, see
``summaries.summarizer.types``). Intake already keeps what it notices in each message
(``memory.services.instructions_capture``); the summary catches what its patterns miss. After
a summary is stored (its transaction committed), :func:`keep_summary_instructions` keeps each
quote as a memory of the user who wrote it, linked to that message:

- only rolling summaries of messages (level 0) are read: each message is in exactly one, so
  a message is looked at once (the periodic and merged summaries cover it again);
- a quote counts only when it stands, verbatim (whitespace and case aside), in a user's
  message of the summarised span: the model cannot put words in anyone's mouth, and the
  author of that message is whose memory it is (a group chat has several);
- a message in which the memory kinds notice a statement themselves is intake's: it kept
  it then, or its owner has since replaced or deleted it, and nothing comes back from it;
  nor does a message that already gave a memory (a second run changes nothing);
- its kind is the one the registry notices in the quote, else an instruction.

``summaries`` and ``memory`` do not import each other; this module, in ``chats``, reads one and
writes through the other.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver

from chatplatform.core.memory.instructions import INSTRUCTION
from chatplatform.core.memory.kinds import STANDING_KINDS, standing_statements_in
from chatplatform.jobs import task_options
from chatplatform.models.conversations import Message, MessageRole
from chatplatform.tenancy.scoping import tenant_scope
from memory.models import FactSource
from memory.selectors import messages_with_memories
from memory.services import FactRejected, fact_save_detailed
from summaries.models import Summary, SummaryKind
from summaries.summarizer.types import StructuredSummary

logger = logging.getLogger(__name__)

#: Most user messages of a span searched for the quotes (the newest).
MAX_MESSAGES_SEARCHED = 2000


def _plain(text: str) -> str:
    return " ".join(text.split()).casefold()


def summary_instructions_keep(tenant_id: int, summary_id: int) -> int:
    """Keep the instructions and preferences summary ``summary_id`` quotes (see the module);
    return how many memories were saved. Idempotent."""
    with tenant_scope(tenant_id):
        summary = Summary.objects.filter(pk=summary_id, kind=SummaryKind.ROLLING, level=0).first()
        if summary is None:
            return 0
        quotes = StructuredSummary.from_content(summary.content).instructions
        if not quotes:
            return 0
        messages = list(
            Message.objects.filter(
                conversation_id=summary.conversation_id,
                seq__gte=summary.first_seq,
                seq__lte=summary.last_seq,
                role=MessageRole.USER,
                author_id__isnull=False,
            )
            .order_by("-seq")
            .values_list("pk", "author_id", "content")[:MAX_MESSAGES_SEARCHED]
        )
    given = messages_with_memories(tenant_id, [pk for pk, _, _ in messages], list(STANDING_KINDS))
    given |= {pk for pk, _, text in messages if standing_statements_in(text)}  # intake's
    saved = 0
    for quote in quotes:
        wanted = _plain(quote)
        source = next(
            (m for m in messages if m[0] not in given and wanted and wanted in _plain(m[2])),
            None,
        )
        if source is None:
            continue
        found = standing_statements_in(quote)
        try:
            result = fact_save_detailed(
                tenant_id,
                source[1],
                quote,
                source=FactSource.USER,
                source_message=source[0],
                kind=found[0].kind if found else INSTRUCTION,
            )
        except FactRejected as rejected:  # turned off, too long, no longer a member
            logger.info("summary %s: instruction not kept (%s)", summary_id, rejected.code)
            continue
        saved += int(result.created)
    return saved


@shared_task(name="chats.tasks.keep_summary_instructions", **task_options())
def keep_summary_instructions(tenant_id: int, summary_id: int) -> int:
    """After a summary is stored: keep the instructions it quotes (idempotent)."""
    return summary_instructions_keep(tenant_id, summary_id)


@receiver(post_save, sender=Summary, dispatch_uid="summary_instructions_kept")
def _summary_stored(sender: Any, instance: Summary, created: bool, **kwargs: Any) -> None:
    """A new summary that quotes instructions: keep them once its transaction commits."""
    if not created or instance.level or instance.kind != SummaryKind.ROLLING:
        return
    if not StructuredSummary.from_content(instance.content).instructions:
        return
    tenant_id, summary_id = instance.tenant_id, instance.pk

    def dispatch() -> None:
        keep_summary_instructions.delay(tenant_id, summary_id)

    transaction.on_commit(dispatch)
