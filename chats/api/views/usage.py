"""Usage: tokens, cost and savings per day and model."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from chatplatform.spending import spend_used_this_month
from chats.api.principal import ApiPrincipal
from chats.api.selectors import UsageRow, usage_by_day_and_model
from chats.api.serializers.usage import UsageQuerySerializer, UsageReportSerializer
from chats.api.views.base import TenantAPIView

DEFAULT_DAYS = 30
MAX_DAYS = 366
#: Figures summed over rows as they are; the savings are worked out from the sums.
SUMMED = (
    "turns",
    "prompt_tokens",
    "completion_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "hypothetical_tokens",
    "cost_usd",
    "full_history_cost_usd",
    "simulated_turns",
)


def _numbers(row: UsageRow) -> dict[str, Any]:
    """A row's figures and its cost story (:class:`CostComparison`, as the meter and the
    admin tell it): savings and extra cost are never negative."""
    numbers = {name: getattr(row, name) for name in SUMMED if name != "simulated_turns"}
    comparison = row.comparison
    numbers.update(
        savings_tokens=comparison.saved_tokens,
        savings_usd=comparison.saved_usd,
        extra_cost_usd=comparison.extra_usd,
        cache_read_share=_share(row.cache_read_tokens, row.prompt_tokens),
        cache_simulated=comparison.simulated,
        summary=comparison.headline(),
    )
    return numbers


def _share(part: int, whole: int) -> float:
    return round(part / whole, 3) if whole else 0.0


def _totals(rows: list[UsageRow]) -> UsageRow:
    sums: dict[str, Any] = {name: 0 for name in SUMMED}
    sums["cost_usd"] = sums["full_history_cost_usd"] = Decimal(0)
    for row in rows:
        for name in SUMMED:
            sums[name] += getattr(row, name)
    return UsageRow(day=date.min, model_profile_id=None, model_name="", model="", **sums)


class UsageView(TenantAPIView):
    serializer_class = UsageReportSerializer

    @extend_schema(
        tags=["usage"],
        operation_id="usage_report",
        summary="Tokens, cost and savings per day and model",
        description="Admin callers see the whole tenant; others the turns answering their own "
        "messages. At most 366 days per request.",
        parameters=[UsageQuerySerializer],
        responses=UsageReportSerializer,
    )
    def get(self, request: Request) -> Response:
        params = self.query(UsageQuerySerializer)
        until = params.get("until") or timezone.localdate()
        since = params.get("since") or until - timedelta(days=DEFAULT_DAYS - 1)
        if since > until:
            raise ValidationError({"since": ["Must not be after until."]})
        if (until - since).days >= MAX_DAYS:
            raise ValidationError({"since": [f"At most {MAX_DAYS} days per request."]})
        principal = self.principal
        rows = usage_by_day_and_model(
            principal.tenant_id,
            since=since,
            until=until,
            author=None if principal.is_admin else principal.user,
        )
        report = {
            "since": since,
            "until": until,
            "scope": "tenant" if principal.is_admin else "user",
            "rows": [
                {
                    "day": row.day,
                    "model_profile": row.model_profile_id,
                    "model_name": row.model_name,
                    "model": row.model,
                    **_numbers(row),
                }
                for row in rows
            ],
            "totals": _numbers(_totals(rows)),
            "this_month": _this_month(principal),
        }
        return Response(UsageReportSerializer(report).data)


def _this_month(principal: ApiPrincipal) -> dict[str, Any]:
    """The caller's spending this month and the limits that apply to them."""
    key_id = principal.key.pk if principal.key is not None else None
    spent, standings = spend_used_this_month(principal.tenant_id, principal.user.pk, key_id)
    return {
        "month": standings.month,
        "spent_usd": spent.cost_usd,
        "spent_tokens": spent.tokens,
        "limits": [
            {
                "spender": item.spender.name,
                "soft_usd": item.limit.soft_usd,
                "hard_usd": item.limit.hard_usd,
                "soft_tokens": item.limit.soft_tokens,
                "hard_tokens": item.limit.hard_tokens,
                "spent_usd": item.spent.cost_usd,
                "spent_tokens": item.spent.tokens,
                "warned": item.warned,
                "exceeded": item.exceeded,
            }
            for item in standings.items
        ],
    }
