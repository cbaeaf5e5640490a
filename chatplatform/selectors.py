"""Reads about tenants and memberships. Membership lookups start from the user, so they run
with the user's own id across tenants (the one place that may, by design)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce

from chatplatform.core.llm.providers import simulated_provider_names
from chatplatform.models import Membership, MembershipRole, Tenant
from chatplatform.tenancy.scoping import all_tenants


def memberships_of(user: Any) -> list[Membership]:
    """Every membership of ``user`` in active tenants, with the tenant loaded."""
    with all_tenants():
        return list(
            Membership.objects.filter(user=user, tenant__is_active=True)
            .select_related("tenant")
            .order_by("tenant__name")
        )


def current_membership(user: Any, preferred_tenant_id: Any = None) -> Membership | None:
    """The membership for the tenant the user chose, else their first one; None if none."""
    memberships = memberships_of(user)
    for membership in memberships:
        if membership.tenant_id == preferred_tenant_id:
            return membership
    return memberships[0] if memberships else None


def administered_tenant_ids(user: Any) -> list[int]:
    """Ids of the active tenants where ``user`` has the admin role."""
    if not user.is_authenticated:
        return []
    with all_tenants():
        return list(
            Membership.objects.filter(
                user=user, role=MembershipRole.ADMIN, tenant__is_active=True
            ).values_list("tenant_id", flat=True)
        )


def is_tenant_admin(user: Any) -> bool:
    return bool(user.is_authenticated and user.is_staff and administered_tenant_ids(user))


def tenants_for_admin(user: Any) -> Any:
    """Tenants the admin user may assign objects to."""
    if user.is_superuser:
        return Tenant.objects.all()
    return Tenant.objects.filter(pk__in=administered_tenant_ids(user))


def turn_usage_sums() -> dict[str, Any]:
    """The aggregates every usage report sums over turn records (tokens as the provider reported
    them, else as estimated; the bill and what the whole history would have cost), for
    ``.annotate(**turn_usage_sums())`` after a ``.values(...)`` grouping."""
    return {
        "turns": Count("pk"),
        "prompt": Sum(Coalesce("prompt_tokens_reported", "prompt_tokens_estimated")),
        "completion": Sum("completion_tokens"),
        "cache_read": Sum("cache_read_tokens"),
        "cache_write": Sum("cache_write_tokens"),
        "hypothetical": Sum("hypothetical_tokens"),
        "cost": Sum("cost_usd"),
        "full_cost": Sum("full_history_cost_usd"),
        # Turns whose cache figures are a built-in provider's simulation (offline).
        "simulated": Count("pk", filter=Q(model_profile__provider__in=simulated_provider_names())),
    }
