"""Summaries of parts of a conversation (rolling, 7-day recent, 30-day long, merged, and the
provider's own compactions)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from chatplatform.tenancy.scoping import TenantOwnedModel


class SummaryKind(models.TextChoices):
    ROLLING = "rolling", "Rolling"
    RECENT = "recent", "Recent (7 days)"
    LONG = "long", "Long (30 days)"
    COMPACTION = "compaction", "Compaction (by the provider)"


class Summary(TenantOwnedModel):
    """A structured summary (``content``: summary, facts, open_questions, and the instructions
    users gave when a model found any) of messages
    ``first_seq``..``last_seq``. ``level`` 0 summarises messages; a higher level merges older
    summaries, which point to it through ``merged_into``. A replaced periodic summary gets
    ``superseded_at``; only summaries with neither are current."""

    conversation = models.ForeignKey(
        "chatplatform.Conversation", on_delete=models.CASCADE, related_name="+"
    )
    kind = models.CharField(max_length=16, choices=SummaryKind.choices)
    level = models.PositiveSmallIntegerField(default=0)
    first_message = models.ForeignKey(
        "chatplatform.Message", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    last_message = models.ForeignKey(
        "chatplatform.Message", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    first_seq = models.PositiveBigIntegerField()
    last_seq = models.PositiveBigIntegerField()
    period_start = models.DateTimeField(null=True, blank=True)
    period_end = models.DateTimeField(null=True, blank=True)
    content = models.JSONField(default=dict)
    text = models.TextField()
    token_count = models.PositiveIntegerField()
    token_counter = models.CharField(max_length=40)
    source_tokens = models.PositiveBigIntegerField(default=0)
    model = models.CharField(max_length=100)
    prompt_version = models.CharField(max_length=20)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    merged_into = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="replaced"
    )
    superseded_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "summaries"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "conversation", "kind", "level", "first_seq", "last_seq"],
                name="summary_unique_range",
            ),
            models.CheckConstraint(
                condition=Q(first_seq__lte=models.F("last_seq")), name="summary_range_ordered"
            ),
        ]
        indexes = [
            models.Index(
                fields=["tenant", "conversation", "kind", "-last_seq"],
                condition=Q(merged_into__isnull=True, superseded_at__isnull=True),
                name="summary_current_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} summary {self.first_seq}-{self.last_seq}"


class TokenBackfillState(TenantOwnedModel):
    """How far the token-count backfill has verified a tenant's messages.

    ``signature`` names the counters the tenant's policies use (its default and any
    conversation overrides). Once a full pass has checked every message up to
    ``verified_upto_id`` against that signature, later runs only look at newer rows and at
    rows still without a count; a changed signature (another model, another tokenizer)
    starts a new full pass, resumable from ``cursor_id``.
    """

    signature = models.CharField(max_length=200)
    verified_upto_id = models.PositiveBigIntegerField(default=0)
    cursor_id = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant"], name="backfill_state_one_per_tenant"),
        ]

    def __str__(self) -> str:
        return f"backfill of tenant {self.tenant_id}: {self.signature} <= {self.verified_upto_id}"
