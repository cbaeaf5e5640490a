"""The user's standing instructions and preferences ranked by how much they concern a new
message, for the turn to send those its instructions section has no room for.

A user who has given many instructions over a long conversation (tens, once it runs to a
million tokens) cannot have them all in a small prompt's section, which keeps the newest.
Each is kept linked to the message it came from, and that message's embedding is stored for
retrieval by meaning: the cosine of the new message's embedding with it ranks them (one
indexed query for the vectors, a product of at most a hundred). Nothing is ranked when the
policy does not retrieve by meaning or the embeddings are unavailable.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np
from django.db.models import OuterRef, Subquery

from chatplatform.core.context.sections import TURN_INSTRUCTIONS
from chatplatform.core.context.types import FactItem, ItemId
from chatplatform.core.memory.kinds import memory_kind_for
from chatplatform.models.conversations import MessageEmbedding
from chatplatform.tenancy.scoping import tenant_scope
from memory.models import UserFact

from . import embeddings
from .dense import question_vector

#: How many are ranked: those that concern a message most (the prompt sends the ones among
#: them its instructions section has no room for; ``TURN_INSTRUCTIONS``).
RANKED = TURN_INSTRUCTIONS


def instructions_for_message(
    tenant_id: int,
    memories: Sequence[FactItem],
    text: str,
    question: Future[np.ndarray | None] | None = None,
) -> list[ItemId]:
    """The ids of the standing instructions and preferences among ``memories`` whose source
    messages are nearest in meaning to ``text``, best first, at most :data:`RANKED`; empty
    when there are none, when the embeddings are unavailable, or when none of their messages
    has a vector yet. ``question``: the embedding of ``text`` already started (it is waited
    for; else ``text`` is embedded here)."""
    standing = [m.id for m in memories if memory_kind_for(m.kind).section == "instructions"]
    if not standing or not embeddings.available():
        return []
    vector = question_vector(text, question)
    if vector is None:
        return []
    with tenant_scope(tenant_id):
        rows = list(
            UserFact.objects.filter(pk__in=standing, source_message__isnull=False)
            .annotate(
                vector=Subquery(
                    MessageEmbedding.objects.filter(
                        message_id=OuterRef("source_message_id"), model=embeddings.MODEL_NAME
                    ).values("vector")[:1]
                )
            )
            .exclude(vector=None)
            .values_list("pk", "vector")
        )
    if not rows:
        return []
    cosines = embeddings.from_bytes([v for _, v in rows]) @ np.asarray(vector, dtype=np.float32)
    order = np.argsort(-cosines, kind="stable")[:RANKED]
    return [rows[int(i)][0] for i in order]
