"""What the load benchmarks against a live server share besides the server: the scratch
tenant's clients (a user, a conversation and an API key each, under a policy on the instant
offline model), the load generator's event loop, the machine's CPU, the hot tables' upkeep
and the latency percentiles of the report."""

from __future__ import annotations

import asyncio
import os
import statistics
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection

from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.services import api_key_create, membership_add
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.services import conversation_create
from tooling.benchmarks.scratch_data import bench_tenant


@dataclass(frozen=True)
class LoadClient:
    """One simulated client: its own user, a conversation it takes part in, an API key."""

    user_id: int
    conversation_id: int
    key: str


def load_clients(count: int) -> list[LoadClient]:
    """``count`` new clients in the scratch tenant, whose active policy is set to one on the
    built-in offline model (instant replies: all measured time is the platform's), with a
    sliding window and a message rate no client reaches."""
    tenant = bench_tenant()
    with all_tenants():
        profile = ModelProfile.objects.get(tenant__isnull=True, name="Offline (built in)")
    with tenant_scope(tenant):
        policy, _ = ContextPolicy.objects.update_or_create(
            tenant=tenant,
            name="bench chat",
            defaults=dict(
                model_profile=profile,
                strategy="sliding_window",
                max_context_tokens=16000,
                reserved_response_tokens=1024,
                system_budget=1000,
                facts_budget=500,
                summaries_budget=0,
                retrieval_budget=0,
                user_messages_per_minute=10000,
            ),
        )
    tenant.active_policy = policy
    tenant.save(update_fields=["active_policy"])
    User = get_user_model()
    run = uuid.uuid4().hex[:8]
    clients = []
    for index in range(count):
        user = User.objects.create_user(username=f"bench-{run}-{index}", password=None)
        membership_add(tenant=tenant, user=user)
        conversation = conversation_create(tenant=tenant, created_by=user, title=f"load {run}")
        _, raw = api_key_create(tenant=tenant, name=f"bench {run}", user=user)
        clients.append(LoadClient(user.pk, conversation.pk, raw))
    return clients


def hot_tables_vacuum() -> None:
    """Leave the hot tables as autovacuum would (it may be off on a test machine): an
    earlier run's dead rows and missing statistics are not this run's cost."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "VACUUM (ANALYZE) chats_conversation, chats_message, chats_turnrecord, "
            "chatplatform_apikey"
        )


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The load generator shares the machine's cores with the server: it runs on uvloop, as
    the server does, so that it takes as little of them as it can."""
    try:
        import uvloop
    except ImportError:  # the server's extra; without it, the standard loop
        return None
    return uvloop.new_event_loop


def machine_cpu_seconds() -> float:
    """Busy CPU seconds of the whole machine so far (every process: server, database, Redis,
    this load generator); 0 where /proc/stat is missing."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    except (OSError, ValueError):
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return (user + nice + system + irq + softirq + steal) / ticks


def p50_p99(values_ms: Sequence[float]) -> tuple[Any, Any]:
    """The median and 99th percentile (nearest rank) of ``values_ms``, rounded to 0.01 ms;
    None for none."""
    if not values_ms:
        return None, None
    ordered = sorted(values_ms)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return round(statistics.median(ordered), 2), round(p99, 2)
