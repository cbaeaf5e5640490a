"""The admin is tenant-scoped: a tenant admin of A never reaches anything of tenant B."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from chatplatform.models import ApiKey, ContextPolicy, Membership, ModelProfile, Tenant
from chatplatform.models.conversations import Conversation, Message, Participant
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from memory.models import UserFact
from summaries.models import Summary
from tests.factories import make_member, offline_profile

pytestmark = pytest.mark.django_db


def build_tenant_objects(tenant, user):
    """One object of every tenant-owned model, in ``tenant``."""
    with tenant_scope(tenant):
        conversation = Conversation.objects.create(tenant=tenant, title=f"{tenant.name} chat")
        Participant.objects.create(tenant=tenant, conversation=conversation, user=user)
        message = Message.objects.create(
            tenant=tenant, conversation=conversation, seq=1, role="user", content="hi", author=user
        )
        policy = ContextPolicy.objects.create(
            tenant=tenant,
            name=f"{tenant.name} policy",
            model_profile=offline_profile(),
            max_context_tokens=32000,
        )
        profile = ModelProfile.objects.create(
            tenant=tenant,
            name=f"{tenant.name} model",
            provider="openai",
            model="m",
            context_window=8000,
            max_output_tokens=1000,
        )
        fact = UserFact.objects.create(tenant=tenant, user=user, text="likes tea")
        summary = Summary.objects.create(
            tenant=tenant,
            conversation=conversation,
            kind="rolling",
            first_seq=1,
            last_seq=1,
            text="s",
            token_count=1,
            token_counter="o200k_base",
            model="offline",
            prompt_version="1",
        )
        key, _ = api_key_create(tenant=tenant, name="k", user=user)
        membership = Membership.objects.get(tenant=tenant, user=user)
    return {
        Conversation: conversation,
        Message: message,
        ContextPolicy: policy,
        ModelProfile: profile,
        UserFact: fact,
        Summary: summary,
        ApiKey: key,
        Membership: membership,
        Tenant: tenant,
    }


def _url(obj, action):
    meta = obj._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{action}", args=[obj.pk])


@pytest.fixture
def foreign(tenant_b, member_b):
    return build_tenant_objects(tenant_b, member_b)


@pytest.fixture
def own(tenant_a, member_a):
    return build_tenant_objects(tenant_a, member_a)


@pytest.fixture
def admin_client_a(client, admin_a):
    client.force_login(admin_a)
    return client


def test_member_without_admin_role_cannot_enter_admin(client, tenant_a):
    member = make_member(tenant_a, username="staff-but-member")
    member.is_staff = True  # set by hand: the admin role alone grants it
    member.save(update_fields=["is_staff"])
    client.force_login(member)
    response = client.get("/admin/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_plain_member_cannot_enter_admin(client, member_a):
    client.force_login(member_a)
    assert client.get("/admin/").status_code == 302


def test_tenant_admin_enters_admin(admin_client_a, own):
    response = admin_client_a.get("/admin/")
    assert response.status_code == 200
    assert b"Context policies" in response.content


@pytest.mark.parametrize(
    "model",
    [
        Conversation,
        Message,
        ContextPolicy,
        ModelProfile,
        UserFact,
        Summary,
        ApiKey,
        Membership,
        Tenant,
    ],
    ids=lambda m: m.__name__,
)
def test_tenant_admin_cannot_list_open_change_or_delete_foreign_objects(
    admin_client_a, own, foreign, model
):
    theirs, mine = foreign[model], own[model]
    meta = model._meta
    changelist = admin_client_a.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
    assert changelist.status_code == 200
    assert f"/{theirs.pk}/change/" not in changelist.content.decode()
    assert f"/{mine.pk}/change/" in changelist.content.decode()

    # Opening a foreign object answers exactly like a missing one.
    opened = admin_client_a.get(_url(theirs, "change"), follow=True)
    missing = admin_client_a.get(
        _url(theirs, "change").replace(f"/{theirs.pk}/", "/999999/"), follow=True
    )
    assert opened.redirect_chain == [
        (r.replace("999999", str(theirs.pk)), code) for r, code in missing.redirect_chain
    ]
    assert opened.status_code == missing.status_code

    posted = admin_client_a.post(_url(theirs, "delete"), {"post": "yes"})
    assert posted.status_code in (302, 403, 404)
    with all_tenants():
        assert model._base_manager.filter(pk=theirs.pk).exists()


def test_bulk_delete_action_cannot_reach_foreign_objects(admin_client_a, own, foreign):
    theirs = foreign[UserFact]
    admin_client_a.post(
        reverse("admin:memory_userfact_changelist"),
        {
            "action": "delete_selected",
            "_selected_action": [theirs.pk, own[UserFact].pk],
            "post": "yes",
        },
    )
    with all_tenants():
        assert UserFact.objects.filter(pk=theirs.pk).exists()


def select_options(html: str, name: str) -> set[str]:
    match = re.search(rf'<select name="{name}".*?</select>', html, re.S)
    assert match, f"no select {name}"
    return set(re.findall(r'<option value="(\d+)"', match.group(0)))


def test_foreign_key_choices_are_scoped(admin_client_a, own, foreign):
    page = admin_client_a.get(reverse("admin:memory_userfact_add")).content.decode()
    users = select_options(page, "user")
    assert str(own[Membership].user_id) in users
    assert str(foreign[Membership].user_id) not in users
    assert select_options(page, "tenant") == {str(own[Tenant].pk)}
    page = admin_client_a.get(reverse("admin:chatplatform_contextpolicy_add")).content.decode()
    profiles = select_options(page, "model_profile")
    assert str(foreign[ModelProfile].pk) not in profiles
    assert str(own[ModelProfile].pk) in profiles
    assert str(offline_profile().pk) in profiles  # shared profiles stay pickable
    page = admin_client_a.get(reverse("admin:summaries_summary_add")).content.decode()
    assert select_options(page, "conversation") == {str(own[Conversation].pk)}


def test_posting_a_foreign_key_of_another_tenant_is_rejected(
    admin_client_a, tenant_a, own, foreign
):
    response = admin_client_a.post(
        reverse("admin:summaries_summary_add"),
        {
            "tenant": tenant_a.pk,
            "conversation": foreign[Conversation].pk,
            "kind": "rolling",
            "level": 0,
            "first_seq": 1,
            "last_seq": 1,
            "content": "{}",
            "text": "x",
            "token_count": 1,
            "token_counter": "o200k_base",
            "source_tokens": 0,
            "model": "m",
            "prompt_version": "1",
            "cost_usd": "0",
        },
    )
    assert response.status_code == 200  # the form comes back with an error
    with tenant_scope(tenant_a):
        assert not Summary.objects.filter(text="x").exists()


def test_posting_into_another_tenant_is_rejected(admin_client_a, own, foreign):
    response = admin_client_a.post(
        reverse("admin:memory_userfact_add"),
        {
            "tenant": foreign[Tenant].pk,
            "user": own[Membership].user_id,
            "text": "planted",
            "source": "user",
        },
    )
    assert response.status_code in (200, 403)
    with all_tenants():
        assert not UserFact.objects.filter(text="planted").exists()


def test_presets_are_read_only_for_tenant_admins(admin_client_a, own):
    with all_tenants():
        preset = ContextPolicy.objects.get(tenant__isnull=True, name="Hybrid")
    response = admin_client_a.post(_url(preset, "change"), {"name": "hijacked"})
    assert response.status_code in (200, 403)
    preset.refresh_from_db()
    assert preset.name == "Hybrid"


def test_superuser_sees_every_tenant(client, own, foreign, django_user_model):
    root = django_user_model.objects.create_superuser("root", "r@example.com", "pw")
    client.force_login(root)
    page = client.get(reverse("admin:memory_userfact_changelist")).content.decode()
    assert f"/{own[UserFact].pk}/change/" in page
    assert f"/{foreign[UserFact].pk}/change/" in page
