"""User facts: per user within a tenant, limited, keyed replacement with history."""

from __future__ import annotations

import pytest

from chatplatform.tenancy.scoping import tenant_scope
from memory.models import UserFact
from memory.selectors import fact_get, fact_history, facts_list, facts_page
from memory.services import (
    FactNotFound,
    FactRejected,
    fact_delete,
    fact_save,
    fact_save_detailed,
    fact_update,
)
from tests.factories import UserFactory
from tests.summaries.helpers import make_policy

pytestmark = pytest.mark.django_db


def current(tenant, user):
    with tenant_scope(tenant):
        return list(
            UserFact.objects.filter(user=user, superseded_at__isnull=True).order_by("created_at")
        )


def test_save_and_list_newest_first(tenant_a, member_a):
    for i in range(25):
        fact_save(tenant_a, member_a, f"Fact number {i}")
    page = facts_list(tenant_a, member_a, page=1, page_size=10)
    assert page.total == 25 and page.pages == 3 and page.has_next and not page.has_previous
    assert [f.text for f in page.items][:2] == ["Fact number 24", "Fact number 23"]
    last = facts_list(tenant_a, member_a, page=3, page_size=10)
    assert len(last.items) == 5 and not last.has_next
    assert facts_list(tenant_a, member_a, page=9).items == []
    assert facts_list(tenant_a, member_a, page_size=10_000).page_size == 100
    items, total = facts_page(tenant_id=tenant_a.pk, user_id=member_a.pk, page=2, page_size=10)
    assert total == 25 and items[0].text == "Fact number 14"


def test_keyed_fact_replaces_the_old_value_which_stays_as_history(tenant_a, member_a):
    first = fact_save(tenant_a, member_a, "Lives in Kyiv", key="home_city")
    second = fact_save(tenant_a, member_a, "Lives in Porto", key="Home City")
    assert second.key == "home_city"
    assert [f.text for f in current(tenant_a, member_a)] == ["Lives in Porto"]
    first.refresh_from_db()
    assert first.superseded_by_id == second.pk and first.superseded_at is not None
    assert first.ended_reason == "replaced"
    history = fact_history(tenant_a, member_a, key="home_city")
    assert [f.text for f in history] == ["Lives in Porto", "Lives in Kyiv"]
    assert [f.text for f in fact_history(tenant_a, member_a, fact_id=first.pk)] == [
        "Lives in Porto",
        "Lives in Kyiv",
    ]


def test_saving_the_same_fact_twice_changes_nothing(tenant_a, member_a):
    one = fact_save_detailed(tenant_a, member_a, "Likes tea", key="drink")
    two = fact_save_detailed(tenant_a, member_a, "Likes tea", key="drink")
    three = fact_save_detailed(tenant_a, member_a, "Has a cat")
    four = fact_save_detailed(tenant_a, member_a, "  has a   CAT ")
    assert two.fact.pk == one.fact.pk and not two.created
    assert four.fact.pk == three.fact.pk and not four.created
    assert len(current(tenant_a, member_a)) == 2


def test_oldest_facts_are_evicted_at_the_policy_limit(tenant_a, member_a):
    make_policy(tenant_a, max_facts_per_user=10)
    saved = [fact_save(tenant_a, member_a, f"Fact {i}") for i in range(13)]
    texts = [f.text for f in current(tenant_a, member_a)]
    assert texts == [f"Fact {i}" for i in range(3, 13)]
    evicted = saved[0]
    evicted.refresh_from_db()
    assert evicted.superseded_at is not None and evicted.ended_reason == "evicted"
    assert evicted.superseded_by_id is None
    result = fact_save_detailed(tenant_a, member_a, "Fact 13")
    assert len(result.evicted) == 1


def test_default_limit_is_fifty(tenant_a, member_a):
    for i in range(55):
        fact_save(tenant_a, member_a, f"Fact {i}")
    assert len(current(tenant_a, member_a)) == 50


def test_history_is_bounded(tenant_a, member_a, monkeypatch):
    monkeypatch.setattr("memory.services.HISTORY_PER_USER", 5)
    for i in range(12):
        fact_save(tenant_a, member_a, f"City {i}", key="city")
    with tenant_scope(tenant_a):
        assert UserFact.objects.filter(user=member_a).count() == 6  # 1 current + 5 history


@pytest.mark.parametrize(
    ("text", "key", "code"),
    [
        ("", None, "empty"),
        ("   \n ", None, "empty"),
        ("bad\x00byte", None, "invalid"),
        ("x" * 501, None, "too_large"),
        (42, None, "invalid"),
        ("ok", "not/a valid key!", "invalid_key"),
        ("ok", "k" * 65, "invalid_key"),
        ("ok", 7, "invalid_key"),
    ],
)
def test_invalid_facts_are_rejected(tenant_a, member_a, text, key, code):
    with pytest.raises(FactRejected) as info:
        fact_save(tenant_a, member_a, text, key=key)
    assert info.value.code == code
    assert current(tenant_a, member_a) == []


def test_fact_length_follows_the_policy(tenant_a, member_a):
    make_policy(tenant_a, max_fact_chars=40)
    with pytest.raises(FactRejected):
        fact_save(tenant_a, member_a, "x" * 41)
    assert fact_save(tenant_a, member_a, "x" * 40)


def test_users_of_other_tenants_cannot_get_facts_here(tenant_a, member_b):
    with pytest.raises(FactRejected) as info:
        fact_save(tenant_a, member_b, "Sneaky")
    assert info.value.code == "not_member"


def test_update_keeps_the_old_version(tenant_a, member_a):
    fact = fact_save(tenant_a, member_a, "Works at Acme")
    new = fact_update(tenant_a, member_a, fact.pk, "Works at Globex")
    assert [f.text for f in current(tenant_a, member_a)] == ["Works at Globex"]
    assert [f.text for f in fact_history(tenant_a, member_a, fact_id=new.pk)] == [
        "Works at Globex",
        "Works at Acme",
    ]


def test_delete_forgets_a_fact_and_its_versions(tenant_a, member_a):
    fact_save(tenant_a, member_a, "Lives in Kyiv", key="city")
    fact = fact_save(tenant_a, member_a, "Lives in Porto", key="city")
    other = fact_save(tenant_a, member_a, "Likes jazz")
    fact_delete(tenant_a, member_a, fact.pk)
    with tenant_scope(tenant_a):
        assert list(UserFact.objects.values_list("text", flat=True)) == ["Likes jazz"]
    fact_delete(tenant_a, member_a, other.pk, forget=False)
    other.refresh_from_db()
    assert other.ended_reason == "deleted" and current(tenant_a, member_a) == []


def test_other_users_and_tenants_facts_are_not_found(
    tenant_a, tenant_b, member_a, member_b, admin_a
):
    mine = fact_save(tenant_a, member_a, "Mine")
    theirs = fact_save(tenant_b, member_b, "Theirs")
    for tenant, user, fact_id in [
        (tenant_a, admin_a, mine.pk),  # another user of the same tenant
        (tenant_a, member_a, theirs.pk),  # another tenant's fact
        (tenant_b, member_a, mine.pk),  # the right fact through the wrong tenant
        (tenant_a, member_a, 999_999),  # missing
    ]:
        with pytest.raises(UserFact.DoesNotExist):
            fact_get(tenant, user, fact_id)
        with pytest.raises(FactNotFound):
            fact_update(tenant, user, fact_id, "changed")
        with pytest.raises(FactNotFound):
            fact_delete(tenant, user, fact_id)
    assert facts_list(tenant_a, admin_a).total == 0
    mine.refresh_from_db()
    assert mine.text == "Mine" and mine.superseded_at is None


def test_a_user_in_two_tenants_has_separate_memories(tenant_a, tenant_b):
    from chatplatform.services import membership_add

    user = UserFactory()
    membership_add(tenant=tenant_a, user=user)
    membership_add(tenant=tenant_b, user=user)
    fact_save(tenant_a, user, "Tenant A fact", key="k")
    fact_save(tenant_b, user, "Tenant B fact", key="k")
    assert [f.text for f in facts_list(tenant_a, user).items] == ["Tenant A fact"]
    assert [f.text for f in facts_list(tenant_b, user).items] == ["Tenant B fact"]
