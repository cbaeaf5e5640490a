"""What a tenant, its members and its API keys spent this month, and where they stand
against their spending limits, read in one indexed query (enforced by
:mod:`chatplatform.spend_limits`).

The month's running totals (:class:`MonthlySpend`) are added in the statement that stores a
turn's usage (``chats.services.hot_writes``), so they never disagree with the turn records.
A month is a calendar month in the tenant's time zone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db import connection
from django.utils import timezone

from chatplatform.core.llm.spend_limits import (
    API_KEY,
    MEMBER,
    TENANT,
    MonthlyLimit,
    MonthlySpend,
    Spender,
    Standing,
    Standings,
    month_end,
    month_start,
)
from chatplatform.models.spending import MonthlySpend as MonthlySpendRow
from chatplatform.models.tenants import ApiKey, Membership, Tenant

#: How long a tenant's time zone is kept in this process before it is read again.
ZONE_CACHE_SECONDS = 60.0

_zones: dict[int, tuple[float, ZoneInfo]] = {}


def zone_of(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def tenant_zone(tenant_id: int) -> ZoneInfo:
    """The tenant's time zone (kept in this process for ``ZONE_CACHE_SECONDS``)."""
    cached = _zones.get(tenant_id)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    name = Tenant.objects.filter(pk=tenant_id).values_list("time_zone", flat=True).first()
    return _zone_keep(tenant_id, name or "UTC")


def _zone_keep(tenant_id: int, name: str) -> ZoneInfo:
    zone = zone_of(name)
    _zones[tenant_id] = (time.monotonic() + ZONE_CACHE_SECONDS, zone)
    return zone


def spend_month(tenant_id: int, now: datetime | None = None) -> date:
    """The first day of the tenant's current spending month."""
    return month_start(now or timezone.now(), tenant_zone(tenant_id))


_LIMIT_COLUMNS = (
    "spend_soft_usd",
    "spend_hard_usd",
    "spend_soft_tokens",
    "spend_hard_tokens",
    "spend_warned_month",
    "id",
)


def _standings_sql() -> str:
    tenants, members = Tenant._meta.db_table, Membership._meta.db_table
    keys, spend = ApiKey._meta.db_table, MonthlySpendRow._meta.db_table
    columns = ", ".join(f"{alias}.{column}" for alias in "tmk" for column in _LIMIT_COLUMNS)
    return (
        f"SELECT t.time_zone, {columns}, st.cost_usd, st.tokens, sm.cost_usd, sm.tokens, "  # noqa: S608
        f"sk.cost_usd, sk.tokens FROM {tenants} t "
        f"LEFT JOIN {members} m ON m.tenant_id = t.id AND m.user_id = %s "
        f"LEFT JOIN {keys} k ON k.tenant_id = t.id AND k.id = %s "
        f"LEFT JOIN {spend} st ON st.tenant_id = t.id AND st.month = %s "
        "AND st.user_pk = 0 AND st.api_key_pk = 0 "
        f"LEFT JOIN {spend} sm ON sm.tenant_id = t.id AND sm.month = %s "
        "AND sm.user_pk = %s AND sm.api_key_pk = 0 "
        f"LEFT JOIN {spend} sk ON sk.tenant_id = t.id AND sk.month = %s "
        "AND sk.user_pk = 0 AND sk.api_key_pk = %s "
        "WHERE t.id = %s"
    )


@dataclass(frozen=True)
class LimitRow:
    """A spender's limit row as read: its limit, when its admins were warned, its id."""

    spender: Spender
    limit: MonthlyLimit
    warned_month: date | None
    row_id: int | None
    spent: MonthlySpend

    @property
    def limited(self) -> bool:
        """The spender exists and has a limit set."""
        return self.row_id is not None and self.limit.is_set

    @property
    def standing(self) -> Standing:
        return Standing(self.spender, self.limit, self.spent)


def _read(
    tenant_id: int, user_id: int | None, api_key_id: int | None, month: date
) -> tuple[str, list[LimitRow]] | None:
    user, key = user_id or -1, api_key_id or -1
    params: list[Any] = [user, key, month, month, user, month, key, tenant_id]
    with connection.cursor() as cursor:
        cursor.execute(_standings_sql(), params)
        row = cursor.fetchone()
    if row is None:
        return None
    width = len(_LIMIT_COLUMNS)
    found = []
    for index, spender in enumerate((TENANT, MEMBER, API_KEY)):
        values = row[1 + index * width : 1 + (index + 1) * width]
        cost, tokens = row[1 + 3 * width + 2 * index : 3 + 3 * width + 2 * index]
        found.append(
            LimitRow(
                spender=spender,
                limit=MonthlyLimit(
                    soft_usd=_decimal(values[0]),
                    hard_usd=_decimal(values[1]),
                    soft_tokens=values[2],
                    hard_tokens=values[3],
                ),
                warned_month=_date(values[4]),
                row_id=values[5],
                spent=MonthlySpend(_decimal(cost) or Decimal(0), int(tokens or 0)),
            )
        )
    return str(row[0] or "UTC"), found


def _decimal(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def _date(value: Any) -> date | None:
    if value is None or isinstance(value, date):
        return value
    return date.fromisoformat(str(value))


def spend_standings(
    tenant_id: int, user_id: int | None, api_key_id: int | None, *, now: datetime | None = None
) -> tuple[Standings, list[LimitRow]]:
    """Where the tenant, the member ``user_id`` and the key ``api_key_id`` stand this month
    (those with a limit), in one indexed read; the rows as read come with it."""
    now = now or timezone.now()
    zone = tenant_zone(tenant_id)
    month = month_start(now, zone)
    read = _read(tenant_id, user_id, api_key_id, month)
    if read is None:
        return Standings(month=month), []
    zone_name, found = read
    if zone_of(zone_name) != zone:  # the tenant's time zone changed since it was kept
        zone = _zone_keep(tenant_id, zone_name)
        if month_start(now, zone) != month:
            month = month_start(now, zone)
            zone_name, found = _read(tenant_id, user_id, api_key_id, month) or (zone_name, [])
    items = tuple(item.standing for item in found if item.limited)
    return Standings(month=month, items=items, month_end=month_end(month, zone)), found


def spend_used_this_month(
    tenant_id: int, user_id: int | None, api_key_id: int | None = None
) -> tuple[MonthlySpend, Standings]:
    """What ``user_id`` spent this month in the tenant (every key acting for them counts),
    and where they (and the key ``api_key_id`` they use, if any) stand against their limits:
    the "used this month" people are shown."""
    standings, found = spend_standings(tenant_id, user_id, api_key_id)
    member = next((item for item in found if item.spender is MEMBER), None)
    return (member.spent if member is not None else MonthlySpend()), standings


@dataclass(frozen=True)
class SpendEntry:
    """What one turn adds to its month's totals: the tenant's, its author's (``user_pk``, 0
    for none) and its API key's (``api_key_pk``, 0 for none)."""

    month: date
    user_pk: int
    api_key_pk: int
    cost_usd: Decimal
    tokens: int

    def rows(self) -> list[tuple[int, int]]:
        """The ``(user_pk, api_key_pk)`` of each total the turn adds to."""
        rows = [(0, 0)]
        if self.user_pk:
            rows.append((self.user_pk, 0))
        if self.api_key_pk:
            rows.append((0, self.api_key_pk))
        return rows


def spend_upsert_sql(source: str) -> str:
    """The statement adding the rows of ``source`` (a VALUES list or a SELECT of tenant,
    month, user_pk, api_key_pk, cost_usd, tokens, turns) to the month's totals: a total's
    first turn creates its row, the next ones add to it."""
    table = MonthlySpendRow._meta.db_table
    return (
        f"INSERT INTO {table} (tenant_id, month, user_pk, api_key_pk, cost_usd, tokens, turns) "
        f"{source} ON CONFLICT (tenant_id, month, user_pk, api_key_pk) DO UPDATE SET "
        f"cost_usd = {table}.cost_usd + excluded.cost_usd, "
        f"tokens = {table}.tokens + excluded.tokens, turns = {table}.turns + 1"
    )


def monthly_spend_add(tenant_id: int, entry: SpendEntry) -> None:
    """Add a turn to its month's totals, in one statement (inside the caller's transaction;
    PostgreSQL's reply finish adds them in the statement that stores the turn's usage)."""
    rows = entry.rows()
    values = ", ".join(["(%s, %s, %s, %s, %s, %s, 1)"] * len(rows))
    params: list[Any] = []
    for user_pk, api_key_pk in rows:
        params += [tenant_id, entry.month, user_pk, api_key_pk, entry.cost_usd, entry.tokens]
    with connection.cursor() as cursor:
        cursor.execute(spend_upsert_sql(f"VALUES {values}"), params)
