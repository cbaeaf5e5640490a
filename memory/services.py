"""Writes of user facts ("memories"): per user within a tenant.

- At most the policy's ``max_facts_per_user`` current facts (10-100, default 50); saving one
  more evicts the oldest (it stays as history, ``ended_reason="evicted"``).
- A keyed fact (``home_city``) has one current value: saving a new value supersedes the old
  one (``superseded_by``/``superseded_at``, ``ended_reason="replaced"``), so memory never
  holds contradictions (the database allows one current fact per tenant, user and key).
  Two times: the record's (``created_at``, ``superseded_at``) and the world's: a fact is
  true from ``valid_from`` (when its source message was sent, else when it was saved) until
  ``valid_until`` (when the value that replaced it was said). An edit corrects the record:
  the new version keeps ``valid_from`` and the old one gets no ``valid_until``.
- Text is validated: a non-empty string, no NUL, at most ``max_fact_chars`` characters;
  keys are short slugs.
- History stays bounded: at most ``HISTORY_PER_USER`` ended facts are kept per user.
- A memory has a kind (:mod:`chatplatform.core.memory.kinds`): a *fact*, or a standing
  *instruction* or *preference* the user gave. Instructions and preferences have no key: a
  later one on the same matter (the kind's ``replaces``) supersedes the earlier, which stays
  as history; they have their own limit (``max_instructions_per_user``) and switch
  (``instructions_enabled``) and are kept in the user's own words, up to
  ``MAX_INSTRUCTION_CHARS``. :func:`instructions_capture` notices them in a user's message.
- A fact is private unless saved or marked ``shareable`` (:func:`fact_set_shareable`); a new
  version of a fact (an edit, a keyed replacement) keeps the setting unless told otherwise.

Every write runs in one transaction holding a row lock on the user's membership, so two
concurrent saves for the same user cannot both pass the limit; a user who is not a member of
the tenant cannot get facts there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from chatplatform.core.memory.kinds import (
    FACT,
    MEMORY_KINDS,
    UnknownMemoryKind,
    memory_kind_for,
    standing_statements_in,
)
from chatplatform.models import Membership, Tenant
from chatplatform.models.conversations import Message
from chatplatform.policies import active_policy
from chatplatform.tenancy.scoping import tenant_scope
from memory.models import FactEnd, FactSource, UserFact

HISTORY_PER_USER = 200
#: Longest standing instruction or preference kept, in characters: a message that states one
#: is kept whole up to :data:`WHOLE_MESSAGE_CHARS`, else the sentences that state it.
MAX_INSTRUCTION_CHARS = 2000
#: A message that states an instruction or preference is kept whole (the user's words around
#: it say what it is about) when it is at most this long; a longer one (a paste, code) is
#: kept as the sentences that state it.
WHOLE_MESSAGE_CHARS = 600
MAX_KEY_CHARS = 64
_KEY = re.compile(r"^[a-z0-9][a-z0-9_.:-]*$")
_KEY_SEPARATORS = re.compile(r"[\s/]+")


class FactRejected(ValueError):
    """The fact cannot be saved; nothing changed. ``code`` is machine-readable."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class FactNotFound(UserFact.DoesNotExist):
    """No such fact for this user in this tenant (missing and forbidden look the same)."""


@dataclass
class SavedFact:
    fact: UserFact
    created: bool
    replaced: UserFact | None = None
    evicted: list[int] = field(default_factory=list)


def _id(obj: Any) -> int:
    value = getattr(obj, "pk", obj)
    if not isinstance(value, int) or isinstance(value, bool):
        raise FactRejected("invalid", f"not an id: {obj!r}")
    return value


def validate_fact_text(text: Any, *, max_chars: int) -> str:
    """The text to store (surrounding whitespace removed), or FactRejected."""
    if not isinstance(text, str):
        raise FactRejected("invalid", "The fact must be text.")
    if "\x00" in text:
        raise FactRejected("invalid", "The fact contains NUL characters.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise FactRejected("invalid", "The fact contains invalid characters.") from None
    text = text.strip()
    if not text:
        raise FactRejected("empty", "The fact is empty.")
    if len(text) > max_chars:
        raise FactRejected(
            "too_large", f"The fact has {len(text):,} characters; the limit is {max_chars:,}."
        )
    return text


def normalize_key(key: Any) -> str | None:
    """A key as stored (lowercase slug), None for no key, or FactRejected."""
    if key is None:
        return None
    if not isinstance(key, str):
        raise FactRejected("invalid_key", "The key must be text.")
    key = _KEY_SEPARATORS.sub("_", key.strip().casefold())
    if not key:
        return None
    if len(key) > MAX_KEY_CHARS or not _KEY.match(key):
        raise FactRejected(
            "invalid_key",
            "The key must be at most 64 letters, digits, '_', '-', '.' or ':' (e.g. 'home_city').",
        )
    return key


def _lock_membership(tenant_id: int, user_id: int, *, for_existing: bool = False) -> None:
    """Serialise the user's fact writes. A non-member gets FactRejected("not_member"), or,
    when acting on an existing fact (``for_existing``), the same FactNotFound as a missing
    fact."""
    with tenant_scope(tenant_id):
        found = list(
            Membership.objects.select_for_update()
            .filter(tenant_id=tenant_id, user_id=user_id)
            .values_list("pk", flat=True)
        )
    if not found:
        if for_existing:
            raise FactNotFound("No such fact.")
        raise FactRejected("not_member", "The user is not a member of this tenant.")


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def fact_save(
    tenant: Tenant | int,
    user: Any,
    text: Any,
    key: Any = None,
    source: str = FactSource.USER,
    source_message: Any = None,
    *,
    shareable: bool | None = None,
    kind: str = FACT,
) -> UserFact:
    """Save a fact about ``user``; return the current fact (see :func:`fact_save_detailed`)."""
    return fact_save_detailed(
        tenant, user, text, key, source, source_message, shareable=shareable, kind=kind
    ).fact


def fact_save_detailed(
    tenant: Tenant | int,
    user: Any,
    text: Any,
    key: Any = None,
    source: str = FactSource.USER,
    source_message: Any = None,
    *,
    shareable: bool | None = None,
    kind: str = FACT,
) -> SavedFact:
    """Save a memory: idempotent for an identical current one, replacing the current value of
    ``key`` (facts) or the current instruction or preference on the same matter, evicting
    the oldest of its section over the policy's limit.

    ``shareable``: whether the fact may be used in replies others read (``None``: as the value
    it replaces, else private); an identical current fact takes a given setting in place."""
    tenant_id, user_id = _id(tenant), _id(user)
    policy = active_policy(tenant_id)
    try:
        entry = memory_kind_for(kind)
    except UnknownMemoryKind as unknown:
        raise FactRejected("invalid", str(unknown)) from None
    standing = entry.section == "instructions"
    if standing and not policy.instructions_enabled:
        raise FactRejected("disabled", "Standing instructions are turned off for this tenant.")
    if not standing and not policy.facts_enabled:
        raise FactRejected("disabled", "User facts are turned off for this tenant.")
    text = validate_fact_text(
        text, max_chars=MAX_INSTRUCTION_CHARS if standing else policy.max_fact_chars
    )
    key = None if standing else normalize_key(key)
    same_section = _kinds_of(entry.section)
    if source not in FactSource.values:
        raise FactRejected("invalid", f"Unknown fact source {source!r}.")
    message_id = getattr(source_message, "pk", source_message)
    now = timezone.now()
    with transaction.atomic():
        _lock_membership(tenant_id, user_id)
        with tenant_scope(tenant_id):
            current = UserFact.objects.filter(
                user_id=user_id, superseded_at__isnull=True, kind__in=same_section
            )
            valid_from = now
            if message_id is not None:
                said_at = next(
                    iter(
                        Message.objects.filter(pk=message_id).values_list("created_at", flat=True)
                    ),
                    None,
                )
                if said_at is None:
                    message_id = None  # not this tenant's message: do not link it
                else:
                    valid_from = said_at
            old: UserFact | None = None
            if key is not None:
                old = current.filter(key=key).first()
                if old is not None and old.text == text:
                    return SavedFact(fact=_with_shareable(old, shareable), created=False)
            else:
                keyless = list(current.filter(key__isnull=True).order_by("-created_at")[:200])
                for existing in keyless:
                    if _same_text(existing.text, text) or entry.restated_by(existing.text, text):
                        return SavedFact(fact=_with_shareable(existing, shareable), created=False)
                old = next((e for e in keyless if entry.replaces(e.text, text)), None)
            if shareable is None:
                shareable = old.shareable if old is not None else False
            if old is not None:
                # Free the (tenant, user, key) slot first: the constraint allows one current.
                # The old value was true until the new one was said.
                UserFact.objects.filter(pk=old.pk).update(
                    superseded_at=now, ended_reason=FactEnd.REPLACED, valid_until=valid_from
                )
            fact = UserFact.objects.create(
                tenant_id=tenant_id,
                user_id=user_id,
                kind=entry.name,
                key=key,
                text=text,
                source=source,
                source_message_id=message_id,
                shareable=bool(shareable),
                valid_from=valid_from,
            )
            if old is not None:
                UserFact.objects.filter(pk=old.pk).update(superseded_by=fact)
                old.superseded_at, old.superseded_by, old.ended_reason = now, fact, FactEnd.REPLACED
                old.valid_until = valid_from
            limit = policy.max_instructions_per_user if standing else policy.max_facts_per_user
            evicted = _evict(tenant_id, user_id, limit, now, same_section)
            _prune_history(tenant_id, user_id)
    return SavedFact(fact=fact, created=True, replaced=old, evicted=evicted)


def _with_shareable(fact: UserFact, shareable: bool | None) -> UserFact:
    """``fact`` with the sharing setting ``shareable`` (unchanged when ``None``), in place:
    whom a fact may reach is a setting of the fact, not a new version of it."""
    if shareable is not None and fact.shareable != bool(shareable):
        UserFact.objects.filter(pk=fact.pk).update(shareable=bool(shareable))
        fact.shareable = bool(shareable)
    return fact


def _kinds_of(section: str) -> list[str]:
    """The memory kinds sent in ``section`` (they share its limit)."""
    return [k.name for k in MEMORY_KINDS.values() if k.section == section]


def _evict(tenant_id: int, user_id: int, limit: int, now: Any, kinds: list[str]) -> list[int]:
    """End the oldest current memories of ``kinds`` beyond ``limit`` (inside the scope and
    transaction)."""
    ids = list(
        UserFact.objects.filter(user_id=user_id, superseded_at__isnull=True, kind__in=kinds)
        .order_by("-created_at", "-pk")
        .values_list("pk", flat=True)[limit : limit + 1000]
    )
    if ids:
        UserFact.objects.filter(pk__in=ids).update(superseded_at=now, ended_reason=FactEnd.EVICTED)
    return ids


def _prune_history(tenant_id: int, user_id: int) -> None:
    stale = list(
        UserFact.objects.filter(user_id=user_id, superseded_at__isnull=False)
        .order_by("-superseded_at", "-pk")
        .values_list("pk", flat=True)[HISTORY_PER_USER : HISTORY_PER_USER + 1000]
    )
    if stale:
        UserFact.objects.filter(pk__in=stale).delete()


def _current_fact(tenant_id: int, user_id: int, fact_id: Any) -> UserFact:
    with tenant_scope(tenant_id):
        found = (
            UserFact.objects.select_for_update()
            .filter(pk=fact_id, user_id=user_id, superseded_at__isnull=True)
            .first()
        )
    if found is None:
        raise FactNotFound("No such fact.")
    return found


def fact_update(
    tenant: Tenant | int,
    user: Any,
    fact_id: Any,
    text: Any,
    source: str = FactSource.USER,
    *,
    shareable: bool | None = None,
) -> UserFact:
    """Change a current fact's text: the new version supersedes the old one (history) and
    keeps its sharing setting unless ``shareable`` says otherwise."""
    tenant_id, user_id = _id(tenant), _id(user)
    policy = active_policy(tenant_id)
    now = timezone.now()
    with transaction.atomic():
        _lock_membership(tenant_id, user_id, for_existing=True)
        old = _current_fact(tenant_id, user_id, fact_id)
        standing = memory_kind_for(old.kind).section == "instructions"
        text = validate_fact_text(
            text, max_chars=MAX_INSTRUCTION_CHARS if standing else policy.max_fact_chars
        )
        if old.text == text:
            with tenant_scope(tenant_id):
                return _with_shareable(old, shareable)
        with tenant_scope(tenant_id):
            UserFact.objects.filter(pk=old.pk).update(
                superseded_at=now, ended_reason=FactEnd.REPLACED
            )
            fact = UserFact.objects.create(
                tenant_id=tenant_id,
                user_id=user_id,
                kind=old.kind,
                key=old.key,
                text=text,
                source=source,
                source_message_id=old.source_message_id,
                shareable=old.shareable if shareable is None else bool(shareable),
                # An edit corrects the record: the value was this one all along.
                valid_from=old.valid_from,
            )
            UserFact.objects.filter(pk=old.pk).update(superseded_by=fact)
            _prune_history(tenant_id, user_id)
    return fact


def fact_set_shareable(tenant: Tenant | int, user: Any, fact_id: Any, shareable: Any) -> UserFact:
    """Mark a current fact shareable (usable in replies the other members of a group chat
    read) or private (only in the owner's one-to-one conversations). A setting, changed in
    place: no new version."""
    if not isinstance(shareable, bool):
        raise FactRejected("invalid", "`shareable` must be true or false.")
    tenant_id, user_id = _id(tenant), _id(user)
    with transaction.atomic():
        _lock_membership(tenant_id, user_id, for_existing=True)
        fact = _current_fact(tenant_id, user_id, fact_id)
        with tenant_scope(tenant_id):
            return _with_shareable(fact, shareable)


def fact_delete(tenant: Tenant | int, user: Any, fact_id: Any, *, forget: bool = True) -> None:
    """Delete a current fact. ``forget`` (default) removes it and its earlier versions for
    good (the user asked to forget it); otherwise it is ended and kept as history."""
    tenant_id, user_id = _id(tenant), _id(user)
    now = timezone.now()
    with transaction.atomic():
        _lock_membership(tenant_id, user_id, for_existing=True)
        fact = _current_fact(tenant_id, user_id, fact_id)
        with tenant_scope(tenant_id):
            if not forget:
                UserFact.objects.filter(pk=fact.pk).update(
                    superseded_at=now, ended_reason=FactEnd.DELETED
                )
                return
            doomed = {fact.pk}
            if fact.key:
                doomed.update(
                    UserFact.objects.filter(user_id=user_id, key=fact.key).values_list(
                        "pk", flat=True
                    )
                )
            frontier = {fact.pk}
            for _ in range(HISTORY_PER_USER):  # keyless versions: follow superseded_by back
                earlier = set(
                    UserFact.objects.filter(
                        user_id=user_id, superseded_by_id__in=frontier
                    ).values_list("pk", flat=True)
                )
                frontier = earlier - doomed
                if not frontier:
                    break
                doomed |= frontier
            UserFact.objects.filter(pk__in=doomed).delete()


def facts_mark_used(tenant: Tenant | int, fact_ids: list[Any]) -> int:
    """Record that these facts went into a prompt (``last_used_at``)."""
    if not fact_ids:
        return 0
    with tenant_scope(_id(tenant)):
        return UserFact.objects.filter(pk__in=fact_ids).update(last_used_at=timezone.now())


def instructions_capture(tenant: Tenant | int, message: Message) -> list[SavedFact]:
    """Keep the standing instructions and preferences a user's ``message`` states (found
    without a model, :func:`~chatplatform.core.memory.kinds.standing_statements_in`), linked
    to it: the whole message when it is short (:data:`WHOLE_MESSAGE_CHARS`), as one memory of
    the first kind it states, else each sentence that states one. A later one on the same
    matter replaces the earlier. Nothing when the policy turns them off, the message has no
    author, or states none; a memory the limits refuse is skipped, never an error."""
    if message.author_id is None or message.role != "user":
        return []
    found = standing_statements_in(message.content)
    if not found or not active_policy(_id(tenant)).instructions_enabled:
        return []
    whole = message.content.strip()
    wanted = (
        [(found[0].kind, whole)]
        if len(whole) <= WHOLE_MESSAGE_CHARS
        else [(f.kind, f.sentence) for f in found]
    )
    saved: list[SavedFact] = []
    for kind, text in wanted:
        try:
            saved.append(
                fact_save_detailed(
                    tenant,
                    message.author_id,
                    text,
                    source=FactSource.USER,
                    source_message=message.pk,
                    kind=kind,
                )
            )
        except FactRejected:
            continue
    return saved


def instructions_recapture(tenant: Tenant | int, message: Message) -> list[SavedFact]:
    """After ``message`` was edited: the standing instructions and preferences kept from its
    earlier text end (``ended_reason="edited"``, kept as history) and what the new text
    states is kept (:func:`instructions_capture`)."""
    tenant_id = _id(tenant)
    standing = _kinds_of("instructions")
    with transaction.atomic(), tenant_scope(tenant_id):
        UserFact.objects.filter(
            source_message_id=message.pk, superseded_at__isnull=True, kind__in=standing
        ).update(superseded_at=timezone.now(), ended_reason=FactEnd.EDITED)
    return instructions_capture(tenant_id, message)


def user_memories_remove(tenant: Tenant | int, user: Any) -> int:
    """Delete every memory of ``user`` in the tenant, current and past (their account is
    being deleted); returns how many rows went."""
    with tenant_scope(_id(tenant)):
        deleted, _ = UserFact.objects.filter(user_id=_id(user)).delete()
    return int(deleted)
