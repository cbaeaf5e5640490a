"""What a spending-limit check adds to a turn, under load: turns are offered at a fixed rate
(``--rate`` a second, open loop) to a pool of worker threads with their own database
connections, as the reply runners' database threads are; each turn checks the limits of its
tenant, member and API key (all three limited, so every figure is read) exactly as a sent
message is checked, then adds its bill to the month's totals, as a finished turn does (the
row locks the checks and the totals meet on are the real ones). The check's own time is
``quota_check_*``; ``lateness_p99_ms`` says whether the machine kept up with the offered
rate (a turn started late was queued behind others)."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

from django.core.management.base import BaseCommand
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chatplatform.models import ApiKey, Membership, Tenant
from chatplatform.services import api_key_create
from chatplatform.spend_limits import spend_limits_check
from chatplatform.spending import SpendEntry, monthly_spend_add, spend_month
from chatplatform.tenancy.scoping import all_tenants
from tooling.benchmarks.load_runs import p50_p99
from tooling.benchmarks.scratch_data import bench_tenant, bench_user

#: Limits far above what the benchmark spends: every check reads them and lets the turn on.
BENCH_LIMITS = {
    "spend_soft_usd": Decimal("900000"),
    "spend_hard_usd": Decimal("1000000"),
    "spend_soft_tokens": 9 * 10**14,
    "spend_hard_tokens": 10**15,
}


class Command(BaseCommand):
    help = "Benchmark the spending-limit check of a turn at a fixed offered rate."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--rate", type=float, default=100.0, help="turns offered a second")
        parser.add_argument("--seconds", type=float, default=10.0, help="how long to offer them")
        parser.add_argument("--threads", type=int, default=8, help="database worker threads")
        parser.add_argument("--json", action="store_true", help="print the figures as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant, user_id, key_id = _spenders()
        spend_limits_check(tenant.pk, user_id, key_id)  # the tenant's time zone is kept
        with CaptureQueriesContext(connection) as queries:
            spend_limits_check(tenant.pk, user_id, key_id)
        rate, seconds = float(options["rate"]), float(options["seconds"])
        count = max(1, int(rate * seconds))
        checks: list[float] = []
        lateness: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()
        month = spend_month(tenant.pk)

        def turn(due: float) -> None:
            started = time.perf_counter()
            try:
                spend_limits_check(tenant.pk, user_id, key_id)
                checked = time.perf_counter()
                with transaction.atomic():
                    monthly_spend_add(
                        tenant.pk, SpendEntry(month, user_id, key_id, Decimal("0.000100"), 120)
                    )
            except Exception as exc:
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                return
            with lock:
                checks.append((checked - started) * 1000)
                lateness.append(max(0.0, started - due) * 1000)

        def close_connection() -> None:
            connections.close_all()

        pool = ThreadPoolExecutor(max_workers=int(options["threads"]))
        start = time.perf_counter() + 0.05
        for index in range(count):
            due = start + index / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            pool.submit(turn, due)
        pool.shutdown(wait=True)
        elapsed = time.perf_counter() - start
        closer = ThreadPoolExecutor(max_workers=int(options["threads"]))
        for _ in range(int(options["threads"])):
            closer.submit(close_connection)
        closer.shutdown(wait=True)
        p50, p99 = p50_p99(checks)
        late_p50, late_p99 = p50_p99(lateness)
        result = {
            "database": connection.vendor,
            "offered_turns_per_s": rate,
            "turns": len(checks),
            "turns_per_s": round(len(checks) / elapsed, 1) if elapsed > 0 else None,
            "quota_check_p50_ms": p50,
            "quota_check_p99_ms": p99,
            "queries_per_check": len(queries),
            "lateness_p50_ms": late_p50,
            "lateness_p99_ms": late_p99,
            "errors": len(errors),
            "first_error": errors[0] if errors else None,
            "generated_at": timezone.now().isoformat(),
        }
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        for name, value in result.items():
            self.stdout.write(f"{name}: {value}")


def _spenders() -> tuple[Tenant, int, int]:
    """The benchmark's tenant, member and API key, each with a limit set."""
    with all_tenants():
        tenant = bench_tenant()
        user = bench_user(tenant)
        key = ApiKey.objects.filter(tenant=tenant, name="bench-quota").first()
        if key is None:
            key = api_key_create(tenant=tenant, name="bench-quota", user=user)[0]
        Tenant.objects.filter(pk=tenant.pk).update(**BENCH_LIMITS)
        Membership.objects.filter(tenant=tenant, user=user).update(**BENCH_LIMITS)
        ApiKey.objects.filter(pk=key.pk).update(**BENCH_LIMITS)
    return tenant, int(user.pk), int(key.pk)
