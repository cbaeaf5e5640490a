"""Usage per day and model, from the turn records, in one grouped query."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chatplatform.models import ModelProfile
from chatplatform.tenancy.scoping import all_tenants
from tests.api.conftest import API, error_of
from tests.api.helpers import add_turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def profiles(presets):
    with all_tenants():
        return list(ModelProfile.objects.filter(tenant__isnull=True).order_by("pk")[:2])


def day(offset: int) -> datetime:
    today = timezone.now().astimezone(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    return today - timedelta(days=offset)


def test_usage_per_day_and_model(
    admin_client_a, conversation_a, member_a, admin_a, profiles, conversation_b, member_b
):
    one, two = profiles
    add_turn(
        conversation_a,
        member_a,
        when=day(1),
        profile=one,
        estimated=100,
        reported=90,
        completion=10,
        hypothetical=1000,
        cost="0.010",
        full_cost="0.025",
        cache_read=5,
        cache_write=7,
    )
    add_turn(
        conversation_a,
        member_a,
        when=day(1),
        profile=one,
        estimated=200,
        completion=20,
        hypothetical=2000,
        cost="0.020",
        full_cost="0.015",
    )
    add_turn(conversation_a, admin_a, when=day(1), profile=two, estimated=50, hypothetical=60)
    add_turn(conversation_a, member_a, when=day(0), profile=one, estimated=10, hypothetical=20)
    add_turn(conversation_b, member_b, when=day(1), profile=one, estimated=999_999)

    with CaptureQueriesContext(connection) as queries:
        response = admin_client_a.get(f"{API}/usage/")
    assert response.status_code == 200
    assert len([q for q in queries if "chats_turnrecord" in q["sql"]]) == 1
    body = response.json()
    assert body["scope"] == "tenant"
    rows = {(r["day"], r["model_profile"]): r for r in body["rows"]}
    assert len(rows) == 3
    first = rows[(day(1).date().isoformat(), one.pk)]
    assert first["turns"] == 2 and first["model_name"] == one.name
    assert first["prompt_tokens"] == 290  # reported where known, else estimated
    assert first["completion_tokens"] == 30
    assert (first["cache_read_tokens"], first["cache_write_tokens"]) == (5, 7)
    assert first["hypothetical_tokens"] == 3000 and first["savings_tokens"] == 2710
    assert first["cost_usd"] == "0.030000"
    # the bill against the whole history sent with prompt caching, and the cache's share
    assert first["full_history_cost_usd"] == "0.040000"
    assert first["savings_usd"] == "0.010000"
    assert first["cache_read_share"] == round(5 / 290, 3)
    assert body["totals"]["turns"] == 4
    assert body["totals"]["prompt_tokens"] == 290 + 50 + 10


def test_members_see_their_own_turns(client_a, conversation_a, member_a, admin_a, profiles):
    add_turn(conversation_a, member_a, when=day(0), profile=profiles[0], estimated=10)
    add_turn(conversation_a, admin_a, when=day(0), profile=profiles[0], estimated=500)
    body = client_a.get(f"{API}/usage/").json()
    assert body["scope"] == "user" and body["totals"]["prompt_tokens"] == 10


def test_date_range(admin_client_a, conversation_a, member_a, profiles):
    add_turn(conversation_a, member_a, when=day(40), profile=profiles[0], estimated=1)
    add_turn(conversation_a, member_a, when=day(3), profile=profiles[0], estimated=2)
    assert admin_client_a.get(f"{API}/usage/").json()["totals"]["prompt_tokens"] == 2
    since, until = day(41).date().isoformat(), day(39).date().isoformat()
    body = admin_client_a.get(f"{API}/usage/", {"since": since, "until": until}).json()
    assert body["totals"]["prompt_tokens"] == 1 and body["since"] == since
    error = error_of(admin_client_a.get(f"{API}/usage/", {"since": until, "until": since}), 400)
    assert list(error["fields"]) == ["since"]
    error_of(admin_client_a.get(f"{API}/usage/", {"since": "2000-01-01"}), 400, "invalid")
    error_of(admin_client_a.get(f"{API}/usage/", {"until": "soon"}), 400, "invalid")


def test_usage_never_counts_another_tenants_turns(client_b, conversation_a, member_a, profiles):
    add_turn(conversation_a, member_a, when=day(0), profile=profiles[0], estimated=10)
    body = client_b.get(f"{API}/usage/").json()
    assert body["rows"] == [] and body["totals"]["turns"] == 0
