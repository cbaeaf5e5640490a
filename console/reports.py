"""Reads behind the admin's reports: usage per tenant over time and per policy, one policy's
usage, the estimator's calibration per model, and the status of the background jobs. Every
read names its tenants."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, F
from django.db.models.functions import TruncDate
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from chatplatform.core.llm.cost_comparison import CostComparison, comparison_of
from chatplatform.models import ApiKey, ContextPolicy, ModelProfile, Tenant
from chatplatform.models.conversations import Message, TurnRecord
from chatplatform.selectors import turn_usage_sums
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from summaries.models import Summary, TokenBackfillState

MAX_DAYS = 366
LATEST_LISTED = 20


@dataclass
class DayUsage:
    day: date
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    hypothetical_tokens: int = 0
    cost_usd: Decimal = Decimal(0)
    #: What the same turns would have cost sending the whole history with prompt caching.
    full_history_cost_usd: Decimal = Decimal(0)
    #: Turns answered by the offline provider (their cache figures are simulated).
    simulated_turns: int = 0

    @property
    def comparison(self) -> CostComparison:
        """The bill against the whole history with caching, as every surface tells it."""
        return comparison_of(self)

    @property
    def saved_tokens(self) -> int:
        return self.comparison.saved_tokens

    @property
    def saved_usd(self) -> Decimal:
        """Billed less than the whole history with caching (zero when it cost more)."""
        return self.comparison.saved_usd

    @property
    def extra_usd(self) -> Decimal:
        """Billed more than the whole history with caching (zero when it saved)."""
        return self.comparison.extra_usd

    @property
    def cache_read_percent(self) -> float:
        """Share of the prompt tokens read from the provider's cache."""
        return self.comparison.cache_read_percent

    def add(self, row: dict[str, Any]) -> None:
        """Add one grouped row of turn records (see :func:`_grouped`)."""
        self.turns += row["turns"]
        self.prompt_tokens += int(row["prompt"] or 0)
        self.completion_tokens += int(row["completion"] or 0)
        self.cache_read_tokens += int(row["cache_read"] or 0)
        self.cache_write_tokens += int(row["cache_write"] or 0)
        self.hypothetical_tokens += int(row["hypothetical"] or 0)
        self.cost_usd += row["cost"] or Decimal(0)
        self.full_history_cost_usd += row["full_cost"] or Decimal(0)
        self.simulated_turns += int(row.get("simulated") or 0)


@dataclass
class PolicyUsage:
    """One policy's turns over the report's days (``policy_id`` None: turns whose policy was
    deleted since)."""

    policy_id: int | None
    name: str
    is_preset: bool
    usage: DayUsage
    #: This policy's share of the report's billed cost.
    cost_share_percent: float = 0.0


@dataclass
class UsageReport:
    days: list[DayUsage]
    totals: DayUsage
    profiles: list[ModelProfile] = field(default_factory=list)
    #: Per policy, the costliest first.
    policies: list[PolicyUsage] = field(default_factory=list)

    def chart_data(self) -> dict[str, Any]:
        """Series for the charts (one point per day; one bar per policy)."""
        return {
            "policies": {
                "labels": [p.name for p in self.policies],
                "turns": [p.usage.turns for p in self.policies],
                "cost": [float(p.usage.cost_usd) for p in self.policies],
                "full_history_cost": [float(p.usage.full_history_cost_usd) for p in self.policies],
            },
            "labels": [d.day.isoformat() for d in self.days],
            "prompt": [d.prompt_tokens for d in self.days],
            "completion": [d.completion_tokens for d in self.days],
            "cache_read": [d.cache_read_tokens for d in self.days],
            "cache_write": [d.cache_write_tokens for d in self.days],
            "hypothetical": [d.hypothetical_tokens for d in self.days],
            "cost": [float(d.cost_usd) for d in self.days],
            "full_history_cost": [float(d.full_history_cost_usd) for d in self.days],
        }


def _first_day(days: int) -> tuple[int, date]:
    days = max(1, min(days, MAX_DAYS))
    return days, timezone.localdate() - timedelta(days=days - 1)


def _grouped(turns: Any, first_day: date) -> list[dict[str, Any]]:
    """The turn records from ``first_day`` on, summed per day and policy (one grouped query
    on the usage index, which leads with the tenant)."""
    return list(
        turns.filter(created_at__gte=timezone.make_aware(datetime.combine(first_day, time.min)))
        .annotate(day=TruncDate("created_at"))
        .values("day", "policy_id")
        .annotate(
            **turn_usage_sums(),
        )
        .order_by("day")
    )


def _by_day(
    rows: list[dict[str, Any]], first_day: date, days: int
) -> tuple[list[DayUsage], DayUsage]:
    by_day = {day: DayUsage(day) for day in (first_day + timedelta(days=i) for i in range(days))}
    totals = DayUsage(timezone.localdate())
    for row in rows:
        day = row["day"]
        bucket = by_day.get(day if isinstance(day, date) else date.fromisoformat(str(day)))
        if bucket is None:
            continue
        bucket.add(row)
        totals.add(row)
    return list(by_day.values()), totals


def _by_policy(rows: list[dict[str, Any]], totals: DayUsage) -> list[PolicyUsage]:
    """Per policy, the costliest first (then by name); names read in the active scope."""
    ids = {row["policy_id"] for row in rows if row["policy_id"] is not None}
    policies = {p.pk: p for p in ContextPolicy.objects.filter(pk__in=ids)}
    found: dict[int | None, PolicyUsage] = {}
    for row in rows:
        policy = policies.get(row["policy_id"])
        key = policy.pk if policy is not None else None
        if key not in found:
            found[key] = PolicyUsage(
                policy_id=key,
                name=policy.name if policy is not None else "Deleted policy",
                is_preset=policy is not None and policy.tenant_id is None,
                usage=DayUsage(totals.day),
            )
        found[key].usage.add(row)
    result = sorted(found.values(), key=lambda p: (-p.usage.cost_usd, p.name))
    for entry in result:
        share = 100.0 * float(entry.usage.cost_usd / totals.cost_usd) if totals.cost_usd else 0.0
        entry.cost_share_percent = round(share, 1)
    return result


def usage_report(tenant: Tenant, *, days: int = 30) -> UsageReport:
    """Per-day and per-policy usage of ``tenant`` over the last ``days`` days; the bill
    beside what the whole history, sent with prompt caching, would have cost."""
    days, first_day = _first_day(days)
    with tenant_scope(tenant):
        rows = _grouped(TurnRecord.objects.filter(tenant=tenant), first_day)
        day_rows, totals = _by_day(rows, first_day, days)
        policies = _by_policy(rows, totals)
        used = calibration_profiles(tenant)
    return UsageReport(days=day_rows, totals=totals, profiles=used, policies=policies)


def policy_usage_report(
    policy: ContextPolicy, tenant_ids: list[int] | None, *, days: int = 30
) -> UsageReport:
    """Per-day usage of one policy over the last ``days`` days, counting only the turns of
    ``tenant_ids`` (None: every tenant, for the operator). A preset is shared: each tenant
    admin sees their own tenants' turns with it, never another's."""
    days, first_day = _first_day(days)
    if tenant_ids is None:
        with all_tenants():
            rows = _grouped(TurnRecord.objects.filter(policy=policy), first_day)
    else:
        if policy.tenant_id is not None:
            tenant_ids = [t for t in tenant_ids if t == policy.tenant_id]
        with tenant_scope(tenant_ids):
            rows = _grouped(
                TurnRecord.objects.filter(tenant_id__in=tenant_ids, policy=policy), first_day
            )
    day_rows, totals = _by_day(rows, first_day, days)
    return UsageReport(days=day_rows, totals=totals)


@dataclass(frozen=True)
class Calibration:
    profile: ModelProfile

    @property
    def samples(self) -> int:
        return self.profile.calibration_samples

    @property
    def mean(self) -> float:
        return self.profile.calibration_ratio_mean

    @property
    def stddev(self) -> float:
        n = self.profile.calibration_samples
        return (self.profile.calibration_ratio_m2 / (n - 1)) ** 0.5 if n > 1 else 0.0


def calibration_profiles(tenant: Tenant) -> list[ModelProfile]:
    """The model profiles the tenant sees (its own and the shared ones)."""
    with tenant_scope(tenant):
        return list(ModelProfile.objects.order_by("provider", "name"))


def calibrations(profiles: list[ModelProfile]) -> list[Calibration]:
    return [Calibration(p) for p in profiles]


@dataclass(frozen=True)
class TenantJobStatus:
    tenant: Tenant
    uncounted_messages: int
    backfill_signature: str
    backfill_verified_upto: int
    backfill_updated_at: Any


def job_status(tenants: list[Tenant]) -> dict[str, Any]:
    """Beat schedules, messages still without token counts and the backfill's progress per
    tenant, the latest summaries, and the API keys created and revoked lately."""
    ids = [t.pk for t in tenants]
    with tenant_scope(ids):
        uncounted = dict(
            Message.objects.filter(tenant_id__in=ids, token_count__isnull=True)
            .values("tenant_id")
            .annotate(n=Count("pk"))
            .values_list("tenant_id", "n")
        )
        states = {s.tenant_id: s for s in TokenBackfillState.objects.filter(tenant_id__in=ids)}
        summaries = list(
            Summary.objects.filter(tenant_id__in=ids)
            .select_related("conversation", "tenant")
            .order_by("-created_at", "-pk")[:LATEST_LISTED]
        )
        keys_created = list(
            ApiKey.objects.filter(tenant_id__in=ids)
            .select_related("tenant", "user")
            .order_by("-created_at", "-pk")[:LATEST_LISTED]
        )
        keys_revoked = list(
            ApiKey.objects.filter(tenant_id__in=ids, revoked_at__isnull=False)
            .select_related("tenant", "user")
            .order_by(F("revoked_at").desc(), "-pk")[:LATEST_LISTED]
        )
    per_tenant = []
    for tenant in tenants:
        state = states.get(tenant.pk)
        per_tenant.append(
            TenantJobStatus(
                tenant=tenant,
                uncounted_messages=uncounted.get(tenant.pk, 0),
                backfill_signature=state.signature if state else "",
                backfill_verified_upto=state.verified_upto_id if state else 0,
                backfill_updated_at=state.updated_at if state else None,
            )
        )
    schedules = list(PeriodicTask.objects.select_related("interval", "crontab").order_by("name"))
    return {
        "schedules": schedules,
        "tenants": per_tenant,
        "summaries": summaries,
        "keys_created": keys_created,
        "keys_revoked": keys_revoked,
    }
