"""Each conversation's simulated prompt cache, kept between turns: what the offline provider
bills as cache reads and writes (it is priced like a real model, whose cache would serve the
prompt's unchanged prefix), and what a reply cut off before its provider reported usage is
billed for its prompt.

Kept in Django's cache (Redis in production, shared by every process; in memory on the
embedded defaults) for the longest lifetime a cache entry can have: after that it would be
empty anyway. Informative only: a cache that cannot be reached leaves it empty (everything
written afresh), never fails the reply.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.core.cache import cache

from chatplatform.core.llm.prompt_cache import TTL_SECONDS, PromptCache
from chatplatform.models import ModelProfile
from chatplatform.models.conversations import Conversation

logger = logging.getLogger(__name__)


def _key(conversation: Conversation) -> str:
    # The creation time too: a database that hands out an id again never meets stale entries.
    created = int(conversation.created_at.timestamp() * 1_000_000)
    return f"prompt-cache:t{conversation.tenant_id}:c{conversation.pk}:{created}"


@dataclass
class ConversationCache:
    """One conversation's simulated cache as loaded for a turn (``cache`` None: the provider's
    cache is not modelled); :meth:`keep` stores what the turn changed."""

    key: str
    cache: PromptCache | None = None
    loaded: dict[str, float] = field(default_factory=dict)

    def keep(self) -> None:
        """Store the entries when the turn changed them (a reply that read or wrote)."""
        if self.cache is None or self.cache.entries == self.loaded:
            return
        try:
            cache.set(
                self.key,
                dict(self.cache.entries),
                timeout=int(max(TTL_SECONDS.values())),
            )
        except Exception:  # the simulation is informative: never fail a reply for it
            logger.warning("could not keep the simulated prompt cache", exc_info=True)
        self.loaded = dict(self.cache.entries)


def conversation_cache(conversation: Conversation, profile: ModelProfile) -> ConversationCache:
    """The conversation's simulated cache, with ``profile``'s minimum cacheable length (none
    for a provider whose cache is not modelled: an OpenAI-compatible server caches prefixes
    by itself, without breakpoints or a price for writing)."""
    if not profile.provider_kind.breakpoint_cache:
        return ConversationCache(_key(conversation))
    minimum = profile.cache_min_tokens
    try:
        stored = cache.get(_key(conversation))
    except Exception:
        logger.warning("could not read the simulated prompt cache", exc_info=True)
        stored = None
    entries = {str(k): float(v) for k, v in stored.items()} if isinstance(stored, dict) else {}
    return ConversationCache(
        _key(conversation), PromptCache(min_tokens=minimum, entries=dict(entries)), entries
    )
