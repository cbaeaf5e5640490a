"""What the admin shows of spending limits: each limited spender's "used this month" beside
its limit fields, read with the same query the limit check uses."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from chatplatform.core.llm.spend_limits import API_KEY, MEMBER, TENANT, Spender
from chatplatform.spending import spend_standings

#: The limit fields, as the admin forms show them.
SPEND_LIMIT_FIELDS = (
    "spend_soft_usd",
    "spend_hard_usd",
    "spend_soft_tokens",
    "spend_hard_tokens",
)


def _spent_text(spender: Spender, tenant_id: int, user_id: Any, api_key_id: Any) -> str:
    standings, rows = spend_standings(tenant_id, user_id, api_key_id)
    row = next(item for item in rows if item.spender is spender) if rows else None
    if row is None:
        return "-"
    spent = row.spent
    text = f"${spent.cost_usd:.2f}, {spent.tokens:,} tokens ({standings.month:%B %Y})"
    standing = next((item for item in standings.items if item.spender is spender), None)
    if standing is not None and standing.exceeded:
        return f"{text}: limit reached"
    if standing is not None and standing.warned:
        return f"{text}: warning reached"
    return text


class SpendUsedMixin:
    """``used_this_month``, a read-only field of a tenant's, a membership's or a key's page."""

    spender: Spender

    @admin.display(description="used this month")
    def used_this_month(self, obj: Any) -> str:
        if obj is None or obj.pk is None:
            return "-"
        if self.spender is TENANT:
            return _spent_text(TENANT, obj.pk, None, None)
        if self.spender is MEMBER:
            return _spent_text(MEMBER, obj.tenant_id, obj.user_id, None)
        return _spent_text(API_KEY, obj.tenant_id, None, obj.pk)
