"""User facts ("memories"): per user within a tenant, across all their conversations."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from chatplatform.core.memory.kinds import FACT, memory_kind_choices
from chatplatform.tenancy.scoping import TenantOwnedModel


class FactSource(models.TextChoices):
    TOOL = "tool", "Saved by the model"
    USER = "user", "Saved by the user"
    API = "api", "Saved through the API"


class FactEnd(models.TextChoices):
    """Why a fact stopped being current (empty while it is current)."""

    REPLACED = "replaced", "Replaced by a newer value"
    EVICTED = "evicted", "Evicted (over the per-user limit)"
    DELETED = "deleted", "Deleted"
    EDITED = "edited", "Its message was edited"


class UserFact(TenantOwnedModel):
    """A memory of a user: a fact, or a standing instruction or preference (``kind``, a
    registry entry of :mod:`chatplatform.core.memory.kinds` that says where it goes in a
    prompt and what replaces it).

    A fact about a user. A keyed fact (``city``: the key names its subject) has one current
    value; saving a new value marks the old one superseded (kept as history, with the time
    it stopped being true), so memory never holds contradictions and a prompt can say what
    changed and when.

    A fact is private unless its owner marks it ``shareable``: a private fact never enters a
    prompt whose reply someone else can read (a conversation with more than one participant),
    only the owner's own one-to-one conversations; a shareable one may enter any prompt of a
    turn its owner starts."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=memory_kind_choices(), default=FACT)
    key = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    text = models.TextField()
    source = models.CharField(max_length=8, choices=FactSource.choices, default=FactSource.USER)
    source_message = models.ForeignKey(
        "chatplatform.Message", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    superseded_by = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    superseded_at = models.DateTimeField(null=True, blank=True)
    #: When it became true as far as the platform knows (its source message's time, else
    #: when it was saved) and when a newer value replaced it (the newer one's ``valid_from``):
    #: the time of the world, beside ``created_at``/``superseded_at``, the time of the record.
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_until = models.DateTimeField(null=True, blank=True)
    ended_reason = models.CharField(max_length=8, choices=FactEnd.choices, blank=True)
    shareable = models.BooleanField(
        default=False,
        help_text="The fact may be used in replies the other members of a group chat read. "
        "Off (private): it is used only in the owner's one-to-one conversations.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "user", "key"],
                condition=Q(key__isnull=False, superseded_at__isnull=True),
                name="fact_unique_current_key",
            ),
        ]
        indexes = [
            models.Index(
                fields=["tenant", "user", "created_at"],
                condition=Q(superseded_at__isnull=True),
                name="fact_current_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key + ': ' if self.key else ''}{self.text[:60]}"
