"""Queue the messages a turn had to count on the fly for the token-count backfill.

A message whose stored count is missing (legacy) or was made by another counter than the
policy's model uses is counted during assembly (``AssembledPrompt.recounted``) and is queued
here, so the next turns of the conversation read its stored count again.

Contract of :func:`recount_queue`: nothing happens before the surrounding transaction
commits; then at most one ``recount_message_tokens`` task is sent per conversation per
:data:`RECOUNT_WINDOW_SECONDS` (a claim in the shared cache), carrying the message ids of
the turn that claimed the window. Ids of later turns in the window are not lost for good:
those messages are still uncounted, so the first turn after the window queues them again.
The task is idempotent. A failure to queue is logged and never fails the turn.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import transaction

from chatplatform.core.context.types import Included
from chatplatform.locks import claim_run
from chats.token_counts.tasks import recount_message_tokens

logger = logging.getLogger(__name__)

#: One recount task per conversation per this many seconds.
RECOUNT_WINDOW_SECONDS = 180
#: Claim name in :func:`chatplatform.locks.claim_run` (scoped by tenant and conversation).
RECOUNT_CLAIM = "recount_message_tokens"


def recounted_message_ids(recounted: Iterable[Included]) -> list[int]:
    """Stored messages among the items the assembly counted itself (history and retrieved
    turns; not the new message, whose counted text may carry a note, nor summaries)."""
    return sorted({i.id for i in recounted if i.kind == "message" and isinstance(i.id, int)})


def recount_queue(tenant_id: int, conversation_id: int, recounted: Iterable[Included]) -> bool:
    """Queue the stored messages in ``recounted`` for counting, after commit (see the module
    contract). Returns whether there was anything to queue."""
    ids = recounted_message_ids(recounted)
    if not ids:
        return False
    transaction.on_commit(lambda: _send(tenant_id, conversation_id, ids))
    return True


def _send(tenant_id: int, conversation_id: int, ids: list[int]) -> None:
    try:
        if not claim_run(RECOUNT_CLAIM, RECOUNT_WINDOW_SECONDS, f"{tenant_id}:{conversation_id}"):
            return
        recount_message_tokens.apply_async((tenant_id, conversation_id, ids))
    except Exception:  # the turn is stored and answered; the periodic backfill catches up
        logger.exception("could not queue a token recount for conversation %s", conversation_id)
