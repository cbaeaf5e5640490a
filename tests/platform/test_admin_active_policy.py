"""A tenant admin chooses the active policy: on the tenant's page, with the "make active"
action of the policy list, or with the button of a policy's page; never another tenant's."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from chatplatform.models import ContextPolicy, Tenant
from chatplatform.policies import policy_for
from chatplatform.services import PolicyNotAllowed, tenant_set_active_policy
from chatplatform.tenancy.scoping import all_tenants
from chats.services import conversation_create
from tests.factories import make_policy

pytestmark = pytest.mark.django_db


def preset(name: str = "Sliding window") -> ContextPolicy:
    with all_tenants():
        return ContextPolicy.objects.get(tenant__isnull=True, name=name)


def active_policy_id(tenant: Tenant) -> int | None:
    return Tenant.objects.values_list("active_policy_id", flat=True).get(pk=tenant.pk)


def texts(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def admin_client_a(client, admin_a):
    client.force_login(admin_a)
    return client


def test_the_tenant_admin_opens_their_tenant_page_and_saves_the_active_policy(
    admin_client_a, tenant_a, tenant_b
):
    mine, theirs = make_policy(tenant_a, name="Mine"), make_policy(tenant_b, name="Theirs")
    url = reverse("admin:chatplatform_tenant_change", args=[tenant_a.pk])
    page = admin_client_a.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert f'value="{mine.pk}"' in html and f'value="{theirs.pk}"' not in html

    response = admin_client_a.post(url, {"active_policy": mine.pk, "time_zone": "UTC"})
    assert response.status_code == 302, response.content[:500]
    assert active_policy_id(tenant_a) == mine.pk

    refused = admin_client_a.post(url, {"active_policy": theirs.pk, "time_zone": "UTC"})
    assert refused.status_code == 200  # the form again, with the error
    assert refused.context["adminform"].form.errors["active_policy"]
    assert active_policy_id(tenant_a) == mine.pk


def test_a_superuser_picks_among_the_tenants_own_policies_and_presets(
    client, django_user_model, tenant_a, tenant_b
):
    theirs = make_policy(tenant_b, name="Theirs")
    root = django_user_model.objects.create_superuser("root", "r@example.com", "pw")
    client.force_login(root)
    url = reverse("admin:chatplatform_tenant_change", args=[tenant_a.pk])
    page = client.get(url)
    assert page.status_code == 200
    assert 'id="id_slug"' in page.content.decode()  # editable for the superuser
    form = page.context["adminform"].form
    assert theirs not in form.fields["active_policy"].queryset
    data = {"name": tenant_a.name, "slug": tenant_a.slug, "is_active": "on"}
    refused = client.post(url, {**data, "active_policy": theirs.pk})
    assert refused.status_code == 200
    assert active_policy_id(tenant_a) != theirs.pk


def test_the_make_active_action_activates_an_own_policy_and_a_preset(
    admin_client_a, tenant_a, member_a
):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a)
    assert policy_for(conversation).name == "Hybrid"  # cached for this process now
    mine = make_policy(tenant_a, name="Mine")
    changelist = reverse("admin:chatplatform_contextpolicy_changelist")
    response = admin_client_a.post(
        changelist, {"action": "make_active", "_selected_action": [mine.pk]}, follow=True
    )
    assert response.status_code == 200
    assert active_policy_id(tenant_a) == mine.pk
    assert any("is now the active policy" in t for t in texts(response))
    assert policy_for(conversation).pk == mine.pk  # the cached policy was dropped

    sliding = preset()
    admin_client_a.post(changelist, {"action": "make_active", "_selected_action": [sliding.pk]})
    assert active_policy_id(tenant_a) == sliding.pk
    assert policy_for(conversation).pk == sliding.pk

    listed = admin_client_a.get(changelist)
    assert listed.status_code == 200
    row = listed.context["cl"].result_list
    assert {p.pk for p in row if p.active_in_tenant} == {sliding.pk}


def test_the_action_needs_exactly_one_policy(admin_client_a, tenant_a):
    first, second = make_policy(tenant_a, name="One"), make_policy(tenant_a, name="Two")
    before = active_policy_id(tenant_a)
    response = admin_client_a.post(
        reverse("admin:chatplatform_contextpolicy_changelist"),
        {"action": "make_active", "_selected_action": [first.pk, second.pk]},
        follow=True,
    )
    assert any("exactly one" in t for t in texts(response))
    assert active_policy_id(tenant_a) == before


def test_the_button_of_the_policy_page_makes_it_active(admin_client_a, tenant_a):
    mine = make_policy(tenant_a, name="Mine")
    change = reverse("admin:chatplatform_contextpolicy_change", args=[mine.pk])
    activate = reverse("admin:chatplatform_contextpolicy_activate", args=[mine.pk])
    assert activate in admin_client_a.get(change).content.decode()
    assert admin_client_a.get(activate).status_code == 405
    response = admin_client_a.post(activate)
    assert response.status_code == 302 and response["Location"] == change
    assert active_policy_id(tenant_a) == mine.pk
    assert "Active policy of: Tenant A" in admin_client_a.get(change).content.decode()


def test_another_tenants_policy_cannot_be_activated(admin_client_a, tenant_a, tenant_b):
    theirs = make_policy(tenant_b, name="Theirs")
    before_a, before_b = active_policy_id(tenant_a), active_policy_id(tenant_b)
    admin_client_a.post(
        reverse("admin:chatplatform_contextpolicy_changelist"),
        {"action": "make_active", "_selected_action": [theirs.pk]},
    )
    activate = reverse("admin:chatplatform_contextpolicy_activate", args=[theirs.pk])
    assert admin_client_a.post(activate).status_code in (302, 404)
    assert (active_policy_id(tenant_a), active_policy_id(tenant_b)) == (before_a, before_b)
    with pytest.raises(PolicyNotAllowed):
        tenant_set_active_policy(tenant=tenant_a, policy=theirs)
    assert active_policy_id(tenant_a) == before_a


def test_a_preset_needs_one_administered_tenant(client, django_user_model, tenant_a):
    root = django_user_model.objects.create_superuser("root", "r@example.com", "pw")
    client.force_login(root)
    before = active_policy_id(tenant_a)
    activate = reverse("admin:chatplatform_contextpolicy_activate", args=[preset().pk])
    response = client.post(activate, follow=True)
    assert any("tenant's page" in t for t in texts(response))
    assert active_policy_id(tenant_a) == before
