"""Monthly spend limits (fields of the tenant, a membership and an API key) and the month's
running totals they are checked against."""

from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from chatplatform.tenancy.scoping import TenantOwnedModel

_NOT_NEGATIVE = [MinValueValidator(Decimal(0))]


class MonthlyLimitFields(models.Model):
    """A soft and a hard monthly limit, in US dollars and/or tokens (empty: none). The soft
    one warns (a banner, an e-mail to the tenant's admins, a response header); the hard one
    refuses new turns until the month ends, before any provider call."""

    spend_soft_usd = models.DecimalField(
        "monthly warning (USD)",
        max_digits=12,
        decimal_places=2,
        null=True,
        blank=True,
        validators=_NOT_NEGATIVE,
        help_text="Warn once this month's bill reaches this. Empty: no warning.",
    )
    spend_hard_usd = models.DecimalField(
        "monthly limit (USD)",
        max_digits=12,
        decimal_places=2,
        null=True,
        blank=True,
        validators=_NOT_NEGATIVE,
        help_text="Refuse new messages once this month's bill reaches this. Empty: no limit.",
    )
    spend_soft_tokens = models.PositiveBigIntegerField(
        "monthly warning (tokens)",
        null=True,
        blank=True,
        help_text="Warn once this month's billed tokens (prompt and completion) reach this.",
    )
    spend_hard_tokens = models.PositiveBigIntegerField(
        "monthly limit (tokens)",
        null=True,
        blank=True,
        help_text="Refuse new messages once this month's billed tokens reach this.",
    )
    #: The month (its first day) the tenant's admins were last warned of this limit.
    spend_warned_month = models.DateField(null=True, blank=True, editable=False)

    class Meta:
        abstract = True

    def clean(self) -> None:
        super().clean()
        errors = {}
        for soft, hard in (
            ("spend_soft_usd", "spend_hard_usd"),
            ("spend_soft_tokens", "spend_hard_tokens"),
        ):
            low, high = getattr(self, soft), getattr(self, hard)
            if low is not None and high is not None and low > high:
                errors[soft] = "The warning must not be above the limit."
        if errors:
            raise ValidationError(errors)


class MonthlySpend(TenantOwnedModel):
    """What a tenant spent in a calendar month (its time zone's), in total and by member and
    by API key: the running sums of its turn records' bills, added in the statement that
    stores each turn's usage, so a limit is checked with one indexed read. ``user_pk`` and
    ``api_key_pk`` say whose row it is (0: not that kind): (0, 0) is the tenant's total."""

    month = models.DateField()
    user_pk = models.BigIntegerField(default=0)
    api_key_pk = models.BigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    tokens = models.PositiveBigIntegerField(default=0)
    turns = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "month", "user_pk", "api_key_pk"], name="monthly_spend_unique"
            ),
        ]
        verbose_name_plural = "monthly spend"

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} t{self.tenant_id} u{self.user_pk} k{self.api_key_pk}"
