"""Spending limits enforced: a turn whose spenders (the tenant, the member, the API key)
reached a hard limit is refused before any provider call, and a soft limit reached for the
first time in a month is e-mailed to the tenant's admins (once, by a background job).

A limit is checked before a message is accepted and again before each queued turn's provider
call: turns already past the check when the limit is reached finish, so a spender goes past
its hard limit by at most the turns in flight, one per conversation answering.
"""

from __future__ import annotations

import logging
from datetime import date, datetime
from typing import Any

from celery import shared_task
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from chatplatform.core.llm.spend_limits import (
    API_KEY,
    MEMBER,
    SPENDERS,
    TENANT,
    Standing,
    Standings,
)
from chatplatform.jobs import task_options
from chatplatform.models.tenants import ApiKey, Membership, MembershipRole, Tenant
from chatplatform.spending import LimitRow, spend_standings
from chatplatform.tenancy.scoping import all_tenants, tenant_scope

logger = logging.getLogger(__name__)

WARNING_TASK = "chatplatform.tasks.spend_warning_send"


class QuotaExceeded(Exception):
    """A hard spending limit is reached: the turn is refused before any provider call and
    nothing is stored."""

    code = "quota_exceeded"

    def __init__(self, standing: Standing, retry_after: int) -> None:
        self.standing = standing
        self.message = standing.describe()
        #: Seconds until the month ends (when the limit's count starts again).
        self.retry_after = retry_after
        super().__init__(self.message)


def spend_limits_check(
    tenant_id: int,
    user_id: int | None,
    api_key_id: int | None = None,
    *,
    now: datetime | None = None,
) -> Standings:
    """Raise QuotaExceeded when a hard limit of the turn's spenders is reached; return the
    standings otherwise (their ``warnings`` for the sender). A soft limit reached for the
    first time this month warns the tenant's admins by e-mail (once, after commit)."""
    now = now or timezone.now()
    standings, found = spend_standings(tenant_id, user_id, api_key_id, now=now)
    for item in found:
        if item.limited and item.standing.warned and item.warned_month != standings.month:
            _warn_once(tenant_id, item, standings.month)
    refusal = standings.refusal
    if refusal is not None:
        end = standings.month_end or now
        raise QuotaExceeded(refusal, max(1, int((end - now).total_seconds())))
    return standings


_ROW_MODELS: dict[str, type[Any]] = {
    TENANT.name: Tenant,
    MEMBER.name: Membership,
    API_KEY.name: ApiKey,
}


def _warn_once(tenant_id: int, item: LimitRow, month: date) -> None:
    """Mark the limit warned for ``month``; the one caller that marks it sends the e-mail."""
    model = _ROW_MODELS[item.spender.name]
    with all_tenants():
        rows = model.objects.filter(pk=item.row_id).exclude(spend_warned_month=month)
        marked = rows.update(spend_warned_month=month)
    if marked:
        spender, row_id = item.spender.name, item.row_id
        transaction.on_commit(
            lambda: spend_warning_send.delay(tenant_id, spender, row_id, month.isoformat())
        )


def spend_warning_email(tenant_id: int, spender: str, row_id: int, month: str) -> int:
    """E-mail the tenant's admins that the limit of ``spender`` (``row_id``: the tenant, the
    membership or the key) reached its warning in ``month``; returns how many were told."""
    tenant = Tenant.objects.filter(pk=tenant_id).first()
    kind = next((item for item in SPENDERS if item.name == spender), None)
    if tenant is None or kind is None:
        return 0
    with tenant_scope(tenant_id):
        user_id = key_id = None
        who = f"The workspace {tenant.name}"
        if kind is MEMBER:
            membership = Membership.objects.select_related("user").filter(pk=row_id).first()
            if membership is None:
                return 0
            user_id, who = membership.user_id, f"{membership.user.get_username()} in {tenant.name}"
        elif kind is API_KEY:
            key = ApiKey.objects.filter(pk=row_id).first()
            if key is None:
                return 0
            key_id, who = key.pk, f"The API key {key} of {tenant.name}"
        admins = list(
            Membership.objects.filter(role=MembershipRole.ADMIN)
            .exclude(user__email="")
            .values_list("user__email", flat=True)
        )
    if not admins:
        return 0
    standings, _ = spend_standings(tenant_id, user_id, key_id)
    standing = next((item for item in standings.items if item.spender is kind), None)
    if standing is None or date.fromisoformat(month) != standings.month:
        return 0  # the limit was removed, or the month is over
    send_mail(_subject(tenant, standing), _body(who, standing), None, admins)
    return len(admins)


def _subject(tenant: Tenant, standing: Standing) -> str:
    state = "limit reached" if standing.exceeded else "warning"
    return f"[{tenant.name}] Monthly spending {state}"


def _body(who: str, standing: Standing) -> str:
    return (
        f"{who}: {standing.describe()}\n\n"
        "Limits are set in the admin: the workspace's by the platform operator, a member's on "
        "the member's page, a key's on the key's page.\n"
    )


@shared_task(name=WARNING_TASK, soft_time_limit=30, time_limit=60, **task_options())
def spend_warning_send(tenant_id: int, spender: str, row_id: int, month: str) -> int:
    """Send one spending warning (the caller marked the limit warned: sent at most once)."""
    return spend_warning_email(tenant_id, spender, row_id, month)
