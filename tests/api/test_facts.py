"""User facts: the caller's own; an admin key manages any member's with ?user=."""

from __future__ import annotations

import pytest

from chatplatform.models import ContextPolicy
from chatplatform.tenancy.scoping import tenant_scope
from memory.models import UserFact
from memory.services import fact_save
from tests.api.conftest import API, error_of

pytestmark = pytest.mark.django_db

FACTS = f"{API}/facts/"


def current(tenant, user) -> list[tuple[str | None, str]]:
    with tenant_scope(tenant):
        return sorted(
            UserFact.objects.filter(user=user, superseded_at__isnull=True).values_list(
                "key", "text"
            ),
            key=str,
        )


def test_create_list_get_update_delete(client_a, tenant_a, member_a):
    created = client_a.post(FACTS, {"text": "Likes green tea"}, format="json")
    assert created.status_code == 201
    fact = created.json()
    assert fact["text"] == "Likes green tea" and fact["source"] == "api"
    assert fact["user"] == "member-a" and fact["current"] is True and fact["key"] is None
    same = client_a.post(FACTS, {"text": "  likes green TEA "}, format="json")
    assert same.status_code == 200 and same.json()["id"] == fact["id"]
    listed = client_a.get(FACTS).json()["results"]
    assert [f["id"] for f in listed] == [fact["id"]]
    assert client_a.get(f"{FACTS}{fact['id']}/").json()["text"] == "Likes green tea"

    updated = client_a.patch(f"{FACTS}{fact['id']}/", {"text": "Likes black tea"}, format="json")
    assert updated.status_code == 200
    new = updated.json()
    assert new["id"] != fact["id"] and new["text"] == "Likes black tea"
    old = client_a.get(f"{FACTS}{fact['id']}/").json()
    assert old["current"] is False and old["superseded_by"] == new["id"]
    error_of(client_a.patch(f"{FACTS}{fact['id']}/", {"text": "x"}, format="json"), 404)

    assert client_a.delete(f"{FACTS}{new['id']}/").status_code == 204
    assert current(tenant_a, member_a) == []
    error_of(client_a.delete(f"{FACTS}{new['id']}/"), 404, "not_found")


def test_keyed_upsert(client_a, tenant_a, member_a):
    first = client_a.put(f"{FACTS}by-key/home_city/", {"text": "Lisbon"}, format="json")
    assert first.status_code == 201 and first.json()["key"] == "home_city"
    same = client_a.put(f"{FACTS}by-key/home_city/", {"text": "Lisbon"}, format="json")
    assert same.status_code == 200 and same.json()["id"] == first.json()["id"]
    moved = client_a.put(f"{FACTS}by-key/Home City/", {"text": "Porto"}, format="json")
    assert moved.status_code == 201 and moved.json()["key"] == "home_city"
    assert current(tenant_a, member_a) == [("home_city", "Porto")]
    keyed = client_a.post(FACTS, {"text": "Kyiv", "key": "home_city"}, format="json")
    assert keyed.status_code == 201
    assert current(tenant_a, member_a) == [("home_city", "Kyiv")]


@pytest.mark.parametrize(
    ("call", "field", "code"),
    [
        (lambda c: c.post(FACTS, {"text": "   "}, format="json"), "text", "empty"),
        (lambda c: c.post(FACTS, {"text": "x" * 501}, format="json"), "text", "too_large"),
        (lambda c: c.post(FACTS, {"text": 5}, format="json"), "text", "invalid"),
        (lambda c: c.post(FACTS, {"text": "a", "key": "$$$"}, format="json"), "key", "invalid_key"),
        (
            lambda c: c.put(f"{FACTS}by-key/{'k' * 65}/", {"text": "a"}, format="json"),
            "key",
            "invalid_key",
        ),
        (lambda c: c.put(f"{FACTS}by-key/city/", {}, format="json"), "text", "invalid"),
    ],
)
def test_bad_facts_are_400(client_a, tenant_a, member_a, call, field, code):
    error = error_of(call(client_a), 400, code)
    assert list(error["fields"]) == [field]
    assert current(tenant_a, member_a) == []


def test_facts_turned_off_is_409(client_a, tenant_a):
    with tenant_scope(tenant_a):
        policy = ContextPolicy.objects.get(pk=tenant_a.active_policy_id)
        policy.pk = None
        policy.tenant = tenant_a
        policy.name = "No facts"
        policy.facts_enabled = False
        policy.save()
    tenant_a.active_policy = policy
    tenant_a.save(update_fields=["active_policy"])
    error_of(client_a.post(FACTS, {"text": "anything"}, format="json"), 409, "disabled")


def test_members_cannot_reach_other_users_facts(client_a, tenant_a, admin_a):
    theirs = fact_save(tenant_a, admin_a, "Admin's secret")
    error_of(client_a.get(f"{FACTS}?user=admin-a"), 403, "permission_denied")
    error_of(client_a.get(f"{FACTS}{theirs.pk}/"), 404, "not_found")
    error_of(client_a.delete(f"{FACTS}{theirs.pk}/"), 404, "not_found")
    error_of(client_a.patch(f"{FACTS}{theirs.pk}/", {"text": "mine"}, format="json"), 404)
    assert current(tenant_a, admin_a) == [(None, "Admin's secret")]
    assert client_a.get(f"{FACTS}?user=member-a").status_code == 200  # themselves: fine


def test_admin_keys_manage_any_members_facts(admin_client_a, tenant_a, member_a, member_b):
    created = admin_client_a.post(f"{FACTS}?user=member-a", {"text": "Is vegan"}, format="json")
    assert created.status_code == 201 and created.json()["user"] == "member-a"
    listed = admin_client_a.get(f"{FACTS}?user=member-a").json()["results"]
    assert [f["text"] for f in listed] == ["Is vegan"]
    fact_id = created.json()["id"]
    assert admin_client_a.get(f"{FACTS}{fact_id}/?user=member-a").status_code == 200
    error_of(admin_client_a.get(f"{FACTS}{fact_id}/"), 404)  # not the admin's own fact
    put = admin_client_a.put(f"{FACTS}by-key/diet/?user=member-a", {"text": "vegan"}, format="json")
    assert put.status_code == 201
    assert admin_client_a.delete(f"{FACTS}{fact_id}/?user=member-a").status_code == 204
    assert current(tenant_a, member_a) == [("diet", "vegan")]
    error_of(admin_client_a.get(f"{FACTS}?user=nobody"), 404, "not_found")
    error_of(admin_client_a.get(f"{FACTS}?user=member-b"), 404, "not_found")


def test_another_tenants_facts_are_404(client_a, admin_client_a, tenant_b, member_b):
    theirs = fact_save(tenant_b, member_b, "B's fact")
    for client in (client_a, admin_client_a):
        error_of(client.get(f"{FACTS}{theirs.pk}/"), 404, "not_found")
        error_of(client.patch(f"{FACTS}{theirs.pk}/", {"text": "x"}, format="json"), 404)
        error_of(client.delete(f"{FACTS}{theirs.pk}/"), 404, "not_found")
        # Naming another user: a member is refused for any name alike (403, existence not
        # revealed); an admin is told there is no such user in its tenant.
        status = 404 if client is admin_client_a else 403
        error_of(client.get(f"{FACTS}?user=member-b"), status)
        by_key = f"{FACTS}by-key/k/?user=member-b"
        error_of(client.put(by_key, {"text": "x"}, format="json"), status)
        assert theirs.pk not in [f["id"] for f in client.get(FACTS).json()["results"]]
    assert current(tenant_b, member_b) == [(None, "B's fact")]


def test_shareable_is_private_by_default_and_editable(client_a, tenant_a, member_a):
    created = client_a.post(FACTS, {"text": "Allergic to penicillin"}, format="json").json()
    assert created["shareable"] is False
    shared = client_a.post(FACTS, {"text": "Likes tea", "shareable": True}, format="json")
    assert shared.status_code == 201 and shared.json()["shareable"] is True

    url = f"{FACTS}{created['id']}/"
    marked = client_a.patch(url, {"shareable": True}, format="json")
    assert marked.status_code == 200
    assert marked.json()["id"] == created["id"] and marked.json()["shareable"] is True
    edited = client_a.patch(url, {"text": "Allergic to aspirin"}, format="json").json()
    assert edited["id"] != created["id"] and edited["shareable"] is True  # a new version keeps it
    private = client_a.patch(f"{FACTS}{edited['id']}/", {"shareable": False}, format="json")
    assert private.json()["shareable"] is False
    listed = {f["text"]: f["shareable"] for f in client_a.get(FACTS).json()["results"]}
    assert listed == {"Allergic to aspirin": False, "Likes tea": True}

    keyed = client_a.put(
        f"{FACTS}by-key/home_city/", {"text": "Lisbon", "shareable": True}, format="json"
    )
    assert keyed.status_code == 201 and keyed.json()["shareable"] is True
    moved = client_a.put(f"{FACTS}by-key/home_city/", {"text": "Porto"}, format="json")
    assert moved.json()["shareable"] is True  # replaces the value, keeps the setting

    error_of(client_a.patch(url, {}, format="json"), 400)
    error_of(client_a.patch(f"{FACTS}{edited['id']}/", {"shareable": "maybe"}, format="json"), 400)
    error_of(client_a.patch(f"{FACTS}999999/", {"shareable": True}, format="json"), 404)


def test_kinds_are_created_listed_and_filtered(client_a, tenant_a, member_a):
    fact = client_a.post(FACTS, {"text": "Lives in Lisbon"}, format="json").json()
    assert fact["kind"] == "fact"
    rule = client_a.post(
        FACTS, {"text": "From now on, answer in Spanish", "kind": "instruction"}, format="json"
    )
    assert rule.status_code == 201
    instruction = rule.json()
    assert instruction["kind"] == "instruction" and instruction["key"] is None
    liked = client_a.post(
        FACTS,
        {"text": "I prefer minimal dependencies", "kind": "preference", "key": "ignored"},
        format="json",
    ).json()
    assert liked["kind"] == "preference" and liked["key"] is None
    every = {f["id"]: f["kind"] for f in client_a.get(FACTS).json()["results"]}
    assert every == {
        fact["id"]: "fact",
        instruction["id"]: "instruction",
        liked["id"]: "preference",
    }
    only = client_a.get(f"{FACTS}?kind=instruction").json()["results"]
    assert [f["id"] for f in only] == [instruction["id"]]
    assert [f["id"] for f in client_a.get(f"{FACTS}?kind=fact").json()["results"]] == [fact["id"]]
    assert client_a.get(f"{FACTS}{instruction['id']}/").json()["kind"] == "instruction"

    # A later instruction on the same matter replaces the earlier (kept as history).
    later = client_a.post(
        FACTS, {"text": "From now on, answer in French", "kind": "instruction"}, format="json"
    ).json()
    earlier = client_a.get(f"{FACTS}{instruction['id']}/").json()
    assert earlier["current"] is False and earlier["superseded_by"] == later["id"]
    edited = client_a.patch(
        f"{FACTS}{later['id']}/", {"text": "From now on, answer in German"}, format="json"
    ).json()
    assert edited["kind"] == "instruction" and edited["id"] != later["id"]
    assert client_a.delete(f"{FACTS}{edited['id']}/").status_code == 204
    assert client_a.get(f"{FACTS}?kind=instruction").json()["results"] == []


def test_an_unknown_kind_is_400(client_a, tenant_a, member_a):
    error = error_of(
        client_a.post(FACTS, {"text": "Always be brief", "kind": "rule"}, format="json"), 400
    )
    assert list(error["fields"]) == ["kind"]
    assert current(tenant_a, member_a) == []
    listed = error_of(client_a.get(f"{FACTS}?kind=rule"), 400)
    assert list(listed["fields"]) == ["kind"]


def test_another_tenants_or_users_instructions_are_never_reached(
    client_a, admin_client_a, tenant_a, tenant_b, member_b, admin_a
):
    theirs = fact_save(tenant_b, member_b, "Always answer in haiku", kind="instruction")
    colleague = fact_save(tenant_a, admin_a, "I prefer terse answers", kind="preference")
    for client in (client_a, admin_client_a):
        for kind in ("", "?kind=instruction", "?kind=preference"):
            ids = [f["id"] for f in client.get(f"{FACTS}{kind}").json()["results"]]
            assert theirs.pk not in ids
        error_of(client.get(f"{FACTS}{theirs.pk}/"), 404, "not_found")
        error_of(client.patch(f"{FACTS}{theirs.pk}/", {"text": "x"}, format="json"), 404)
        error_of(client.delete(f"{FACTS}{theirs.pk}/"), 404, "not_found")
    assert colleague.pk not in [f["id"] for f in client_a.get(FACTS).json()["results"]]
    error_of(client_a.patch(f"{FACTS}{colleague.pk}/", {"text": "x"}, format="json"), 404)
    error_of(client_a.delete(f"{FACTS}{colleague.pk}/"), 404, "not_found")
    with tenant_scope(tenant_b):
        assert UserFact.objects.get(pk=theirs.pk).superseded_at is None
    with tenant_scope(tenant_a):
        assert UserFact.objects.get(pk=colleague.pk).superseded_at is None


def test_instructions_turned_off_is_409_and_facts_still_save(client_a, tenant_a):
    with tenant_scope(tenant_a):
        policy = ContextPolicy.objects.get(pk=tenant_a.active_policy_id)
        policy.pk = None
        policy.tenant = tenant_a
        policy.name = "No instructions"
        policy.instructions_enabled = False
        policy.save()
    tenant_a.active_policy = policy
    tenant_a.save(update_fields=["active_policy"])
    error_of(
        client_a.post(FACTS, {"text": "Always be brief", "kind": "instruction"}, format="json"),
        409,
        "disabled",
    )
    assert client_a.post(FACTS, {"text": "Likes tea"}, format="json").status_code == 201
