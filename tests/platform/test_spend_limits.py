"""Spending limits: the month's totals kept with each turn, the refusal past a hard limit in
every protocol (nothing stored, no provider call), the warning of a soft one (header, event,
one e-mail a month), members' and keys' limits apart from each other and from other tenants,
and who may set which limit in the admin.

Sending runs the reply pipeline on other threads (their own database connections), so these
tests commit (``transaction=True``)."""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.core import mail
from django.db import connection
from django.db.models import Sum

from chatplatform.core.llm.spend_limits import (
    MEMBER,
    TENANT,
    MonthlyLimit,
    MonthlySpend,
    Standing,
    month_end,
    month_start,
)
from chatplatform.models import ApiKey, AuditEvent, Membership, Tenant
from chatplatform.models import MonthlySpend as SpendRow
from chatplatform.models.conversations import Message, MessageRole, Status, TurnRecord
from chatplatform.services import api_key_create
from chatplatform.spend_limits import QuotaExceeded, spend_limits_check
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.replies.turns import turn_prepare_next
from chats.services.messages import message_create
from config.celery import app as celery_app
from tests.api.conftest import API, error_of, key_client
from tests.api.sse import parse_events

# --- the rules, without a database ---------------------------------------------------------


def test_a_standing_warns_at_the_soft_figure_and_refuses_at_the_hard_one():
    limit = MonthlyLimit(soft_usd=Decimal("5"), hard_usd=Decimal("10"), hard_tokens=1000)
    below = Standing(MEMBER, limit, MonthlySpend(Decimal("4.99"), 10))
    warned = Standing(MEMBER, limit, MonthlySpend(Decimal("5"), 10))
    by_tokens = Standing(MEMBER, limit, MonthlySpend(Decimal("1"), 1000))
    assert not below.warned and not below.exceeded
    assert warned.warned and not warned.exceeded
    assert "$5.00 of $5.00" in warned.describe() and warned.describe().startswith("Your")
    assert by_tokens.exceeded and "1,000 of 1,000 tokens" in by_tokens.describe()
    assert "refused" in by_tokens.describe()
    assert not MonthlyLimit().is_set
    unlimited = Standing(TENANT, MonthlyLimit(), MonthlySpend(Decimal("1e9"), 10**12))
    assert not unlimited.warned


def test_a_month_is_the_tenants_calendar_month():
    paris, tokyo = ZoneInfo("Europe/Paris"), ZoneInfo("Asia/Tokyo")
    late_utc = datetime(2026, 1, 31, 23, 30, tzinfo=UTC)
    assert month_start(late_utc, paris) == date(2026, 2, 1)  # 00:30 on February 1st there
    assert month_start(late_utc, ZoneInfo("America/New_York")) == date(2026, 1, 1)
    assert month_end(date(2026, 12, 1), tokyo) == datetime(2027, 1, 1, tzinfo=tokyo)


# --- through the real paths ------------------------------------------------------------------

pytestmark_db = pytest.mark.django_db(transaction=True)


def url(conversation) -> str:
    return f"{API}/conversations/{conversation.pk}/messages/"


def messages_of(conversation) -> list[tuple[str, str, str]]:
    with tenant_scope(conversation.tenant_id):
        return list(
            Message.objects.filter(conversation_id=conversation.pk)
            .order_by("seq")
            .values_list("role", "status", "error_code")
        )


def totals(tenant) -> dict[tuple[int, int], tuple[Decimal, int, int]]:
    with all_tenants():
        return {
            (row.user_pk, row.api_key_pk): (row.cost_usd, row.tokens, row.turns)
            for row in SpendRow.objects.filter(tenant=tenant)
        }


def set_limit(model, pk, **fields) -> None:
    with all_tenants():
        model.objects.filter(pk=pk).update(**fields)


@pytest.fixture
def keyed_a(tenant_a, member_a):
    key, raw = api_key_create(tenant=tenant_a, name="spender", user=member_a)
    return key, key_client(raw)


@pytestmark_db
def test_each_turn_adds_to_the_tenants_the_members_and_the_keys_totals(
    keyed_a, tenant_a, member_a, conversation_a
):
    key, client = keyed_a
    for text in ("Hello", "Tell me more"):
        assert client.post(url(conversation_a), {"content": text}, format="json").status_code == 201
    with tenant_scope(tenant_a):
        records = TurnRecord.objects.filter(conversation_id=conversation_a.pk)
        billed = records.aggregate(cost=Sum("cost_usd"))["cost"]
        assert set(records.values_list("api_key_id", flat=True)) == {key.pk}
        assert set(
            Message.objects.filter(
                conversation_id=conversation_a.pk, role=MessageRole.USER
            ).values_list("api_key_id", flat=True)
        ) == {key.pk}
    found = totals(tenant_a)
    assert set(found) == {(0, 0), (member_a.pk, 0), (0, key.pk)}
    cost, tokens, turns = found[(0, 0)]
    assert turns == 2 and tokens > 0 and cost == billed
    assert found[(member_a.pk, 0)] == found[(0, key.pk)] == found[(0, 0)]


@pytestmark_db
def test_a_reached_hard_limit_refuses_before_storing_or_calling_the_provider(
    keyed_a, tenant_a, member_a, conversation_a, conversation_b, member_b, tenant_b
):
    _key, client = keyed_a
    assert client.post(url(conversation_a), {"content": "Hello"}, format="json").status_code == 201
    set_limit(Tenant, tenant_a.pk, spend_hard_tokens=1)
    before = messages_of(conversation_a)
    response = client.post(url(conversation_a), {"content": "Again"}, format="json")
    body = error_of(response, 429, "quota_exceeded")
    assert "workspace's monthly spending limit is reached" in body["message"]
    assert int(response["Retry-After"]) > 0 and response["x-should-retry"] == "false"
    assert messages_of(conversation_a) == before
    # The same on the event stream: an HTTP error before any event.
    streamed = client.post(
        url(conversation_a), {"content": "Again"}, format="json", HTTP_ACCEPT="text/event-stream"
    )
    error_of(streamed, 429, "quota_exceeded")
    assert messages_of(conversation_a) == before
    # Another tenant is not limited by it.
    _, raw_b = api_key_create(tenant=tenant_b, name="b", user=member_b)
    assert (
        key_client(raw_b).post(url(conversation_b), {"content": "Hi"}, format="json").status_code
        == 201
    )
    assert (0, 0) in totals(tenant_b) and totals(tenant_b)[(0, 0)][2] == 1


@pytestmark_db
def test_a_message_accepted_before_is_still_answered_when_sent_again(
    keyed_a, tenant_a, conversation_a
):
    _key, client = keyed_a
    first = client.post(
        url(conversation_a), {"content": "Hello", "client_id": "c-1"}, format="json"
    )
    assert first.status_code == 201
    set_limit(Tenant, tenant_a.pk, spend_hard_tokens=1)
    again = client.post(
        url(conversation_a), {"content": "Hello", "client_id": "c-1"}, format="json"
    )
    assert again.status_code == 200 and again.json()["duplicate"] is True


@pytestmark_db
def test_a_members_limit_and_a_keys_limit_apply_to_them_alone(
    tenant_a, member_a, admin_a, conversation_a
):
    key_one, raw_one = api_key_create(tenant=tenant_a, name="one", user=member_a)
    _key_two, raw_two = api_key_create(tenant=tenant_a, name="two", user=member_a)
    one, two = key_client(raw_one), key_client(raw_two)
    assert one.post(url(conversation_a), {"content": "Hello"}, format="json").status_code == 201
    set_limit(ApiKey, key_one.pk, spend_hard_tokens=1)
    refused = one.post(url(conversation_a), {"content": "More"}, format="json")
    assert "API key's monthly spending limit" in error_of(refused, 429, "quota_exceeded")["message"]
    assert two.post(url(conversation_a), {"content": "More"}, format="json").status_code == 201
    # The member's own limit counts every key acting for them; another member is not limited.
    with all_tenants():
        membership = Membership.objects.get(tenant=tenant_a, user=member_a)
    set_limit(Membership, membership.pk, spend_hard_tokens=1)
    refused = two.post(url(conversation_a), {"content": "More"}, format="json")
    assert error_of(refused, 429, "quota_exceeded")["message"].startswith("Your monthly")
    with pytest.raises(QuotaExceeded):
        spend_limits_check(tenant_a.pk, member_a.pk, None)
    assert spend_limits_check(tenant_a.pk, admin_a.pk, None).refusal is None


@pytest.fixture
def eager_tasks():
    """Background jobs run in-process (the warning's e-mail is sent by one)."""
    old = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = old


@pytestmark_db
@pytest.mark.usefixtures("eager_tasks")
def test_a_soft_limit_warns_the_sender_and_emails_the_admins_once_a_month(
    keyed_a, tenant_a, admin_a, conversation_a
):
    admin_a.email = "admin-a@example.com"
    admin_a.save(update_fields=["email"])
    _key, client = keyed_a
    assert client.post(url(conversation_a), {"content": "Hello"}, format="json").status_code == 201
    assert "X-Spend-Warning" not in client.post(
        url(conversation_a), {"content": "Two"}, format="json"
    )
    set_limit(Tenant, tenant_a.pk, spend_soft_tokens=1, spend_hard_tokens=10**9)
    mail.outbox.clear()
    warned = client.post(url(conversation_a), {"content": "Three"}, format="json")
    assert warned.status_code == 201
    assert "near its limit" in warned["X-Spend-Warning"]
    streamed = client.post(
        url(conversation_a), {"content": "Four"}, format="json", HTTP_ACCEPT="text/event-stream"
    )
    events = parse_events(streamed.streaming_content)
    assert [name for name, _ in events][:2] == ["ack", "spend_warning"]
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["admin-a@example.com"]
    assert "Monthly spending warning" in mail.outbox[0].subject
    with all_tenants():
        assert Tenant.objects.get(pk=tenant_a.pk).spend_warned_month is not None


@pytestmark_db
def test_a_queued_turn_past_the_limit_gets_a_failed_reply_without_a_provider_call(
    tenant_a, member_a, conversation_a
):
    message, _ = message_create(
        conversation=conversation_a, role=MessageRole.USER, content="Queued", author=member_a
    )
    set_limit(Tenant, tenant_a.pk, spend_hard_usd=Decimal(0))
    found = turn_prepare_next(tenant_a.pk, conversation_a.pk)
    assert found.prepared is None
    [refused] = found.failures
    assert refused.code == "quota_exceeded" and refused.event()["retryable"] is False
    assert messages_of(conversation_a)[-1] == ("assistant", Status.FAILED, "quota_exceeded")
    with tenant_scope(tenant_a):
        assert not TurnRecord.objects.filter(user_message=message).exists()


@pytest.mark.postgres
@pytestmark_db
def test_parallel_sends_overspend_by_at_most_the_turn_in_flight(keyed_a, tenant_a, conversation_a):
    _key, client = keyed_a
    assert client.post(url(conversation_a), {"content": "Hello"}, format="json").status_code == 201
    one_turn = totals(tenant_a)[(0, 0)][1]
    set_limit(Tenant, tenant_a.pk, spend_hard_tokens=one_turn + 1)
    barrier = threading.Barrier(20)
    statuses: list[int] = []

    def send(index: int) -> None:
        barrier.wait()
        try:
            response = client.post(
                url(conversation_a), {"content": f"Parallel {index}"}, format="json"
            )
            statuses.append(response.status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(index,)) for index in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(statuses) == 20 and set(statuses) <= {201, 202, 429}
    completed = [row for row in messages_of(conversation_a) if row[:2] == ("assistant", "complete")]
    # The first turn, then at most the one turn in flight when the limit was reached.
    assert len(completed) <= 3
    assert totals(tenant_a)[(0, 0)][2] == len(completed)


@pytestmark_db
def test_the_operator_sets_the_tenants_limit_and_the_tenant_admin_the_members(
    client, tenant_a, admin_a, member_a, django_user_model
):
    operator = django_user_model.objects.create_superuser("operator", "op@example.com", "pw")
    client.force_login(admin_a)
    page = client.get(f"/admin/chatplatform/tenant/{tenant_a.pk}/change/")
    assert page.status_code == 200
    assert b'name="spend_hard_usd"' not in page.content  # read-only for the tenant's admin
    with all_tenants():
        membership = Membership.objects.get(tenant=tenant_a, user=member_a)
    page = client.get(f"/admin/chatplatform/membership/{membership.pk}/change/")
    assert b'name="spend_hard_usd"' in page.content and b"Used this month" in page.content
    client.force_login(operator)
    page = client.get(f"/admin/chatplatform/tenant/{tenant_a.pk}/change/")
    assert b'name="spend_hard_usd"' in page.content
    with all_tenants():
        before = AuditEvent.objects.count()
    form = {
        "name": tenant_a.name,
        "slug": tenant_a.slug,
        "is_active": "on",
        "time_zone": "Europe/Paris",
        "spend_soft_usd": "5",
        "spend_hard_usd": "1",
    }
    refused = client.post(f"/admin/chatplatform/tenant/{tenant_a.pk}/change/", form)
    assert refused.status_code == 200 and b"must not be above the limit" in refused.content
    form["spend_hard_usd"] = "10"
    saved = client.post(f"/admin/chatplatform/tenant/{tenant_a.pk}/change/", form)
    assert saved.status_code == 302
    with all_tenants():
        tenant = Tenant.objects.get(pk=tenant_a.pk)
        assert tenant.spend_hard_usd == Decimal("10") and tenant.time_zone == "Europe/Paris"
        assert AuditEvent.objects.count() == before + 1
        changed = AuditEvent.objects.latest("pk")
    assert "spend_hard_usd" in str(changed.changes)


@pytestmark_db
def test_the_chat_page_shows_used_this_month_and_the_banner(
    client, keyed_a, tenant_a, member_a, conversation_a
):
    _key, api = keyed_a
    assert api.post(url(conversation_a), {"content": "Hello"}, format="json").status_code == 201
    client.force_login(member_a)
    page = client.get(f"/chats/{conversation_a.pk}/").content.decode()
    assert "Used this month" not in page  # no limit applies: nothing to show
    with all_tenants():
        membership = Membership.objects.get(tenant=tenant_a, user=member_a)
    set_limit(Membership, membership.pk, spend_hard_usd=Decimal("25"), spend_soft_tokens=1)
    page = client.get(f"/chats/{conversation_a.pk}/").content.decode()
    assert "Used this month: $" in page and "of $25.00" in page
    assert 'id="spend-banner"' in page and "Your monthly spending is near its limit" in page


@pytestmark_db
def test_the_usage_api_says_what_was_used_this_month_against_which_limits(
    keyed_a, tenant_a, member_a, conversation_a
):
    key, client = keyed_a
    assert client.post(url(conversation_a), {"content": "Hello"}, format="json").status_code == 201
    set_limit(ApiKey, key.pk, spend_hard_usd=Decimal("3"))
    month = client.get(f"{API}/usage/").json()["this_month"]
    assert month["spent_tokens"] == totals(tenant_a)[(member_a.pk, 0)][1] > 0
    [limit] = month["limits"]
    assert limit["spender"] == "api_key" and limit["hard_usd"] == "3.00"
    assert limit["exceeded"] is False and limit["spent_tokens"] == month["spent_tokens"]
