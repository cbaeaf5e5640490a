"""bench_backfill prints exactly messages, messages_per_s and counter."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from chatplatform.models import Tenant
from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import all_tenants


@pytest.mark.django_db(transaction=True)
def test_bench_backfill_json_and_cleanup():
    out = io.StringIO()
    call_command(
        "bench_backfill",
        "--messages",
        "1200",
        "--batch-size",
        "500",
        "--counter",
        "o200k_base",
        "--json",
        "--workers",
        "2",
        stdout=out,
    )
    result = json.loads(out.getvalue().strip().splitlines()[-1])
    assert set(result) == {"messages", "messages_per_s", "counter"}
    assert result["messages"] == 1200 and result["messages_per_s"] > 0
    assert result["counter"] == "o200k_base"
    assert not Tenant.objects.filter(slug="bench-backfill-scratch").exists()
    with all_tenants():
        assert Message.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_bench_backfill_keep_then_start_fresh():
    for size in (300, 200):
        out = io.StringIO()
        call_command(
            "bench_backfill",
            "--messages",
            str(size),
            "--counter",
            "o200k_base",
            "--keep",
            "--json",
            stdout=out,
        )
        assert json.loads(out.getvalue().strip())["messages"] == size
        with all_tenants():
            assert Message.objects.filter(tenant__slug="bench-backfill-scratch").count() == size
    call_command(
        "bench_backfill",
        "--messages",
        "10",
        "--counter",
        "o200k_base",
        "--json",
        stdout=io.StringIO(),
    )
    assert not Tenant.objects.filter(slug="bench-backfill-scratch").exists()
