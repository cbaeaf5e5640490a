"""A tenant admin copies a preset into their tenant in one click (the preset's page, the list),
"Save as new" never validates an empty form, and a new policy starts from the default
preset's values: the same values as the policy's field defaults and the test builders."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from chatplatform.models import ContextPolicy
from chatplatform.policies import DEFAULT_PRESET
from chatplatform.services import (
    PolicyNotAllowed,
    membership_add,
    policy_copy,
    policy_settings,
)
from chatplatform.tenancy.scoping import all_tenants
from tests.factories import POLICY_DEFAULTS, make_admin, make_policy

pytestmark = pytest.mark.django_db


def preset(name: str = DEFAULT_PRESET) -> ContextPolicy:
    with all_tenants():
        return ContextPolicy.objects.get(tenant__isnull=True, name=name)


def policies_of(tenant) -> list[ContextPolicy]:
    with all_tenants():
        return list(ContextPolicy.objects.filter(tenant=tenant).order_by("pk"))


def texts(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def copy_url(policy: ContextPolicy) -> str:
    return reverse("admin:chatplatform_contextpolicy_copy", args=[policy.pk])


def change_url(policy: ContextPolicy) -> str:
    return reverse("admin:chatplatform_contextpolicy_change", args=[policy.pk])


@pytest.fixture
def admin_client_a(client, admin_a):
    client.force_login(admin_a)
    return client


def test_copy_to_my_tenant_creates_the_tenants_policy_with_the_presets_values_and_opens_it(
    admin_client_a, tenant_a
):
    hybrid = preset()
    page = admin_client_a.get(change_url(hybrid)).content.decode()
    assert copy_url(hybrid) in page and "Copy to my tenant" in page

    response = admin_client_a.post(copy_url(hybrid))
    [copy] = policies_of(tenant_a)
    assert response.status_code == 302 and response["Location"] == change_url(copy)
    assert copy.name == "Hybrid (copy)" and copy.tenant_id == tenant_a.pk
    assert policy_settings(copy) == policy_settings(hybrid)
    assert any("Hybrid (copy)" in text for text in texts(response))
    # The copy opens editable: its fields are in the form.
    opened = admin_client_a.get(change_url(copy))
    assert 'name="max_context_tokens"' in opened.content.decode()

    admin_client_a.post(copy_url(hybrid))
    assert [p.name for p in policies_of(tenant_a)] == ["Hybrid (copy)", "Hybrid (copy 2)"]


def test_the_list_offers_the_copy_button_on_every_row(admin_client_a, tenant_a):
    body = admin_client_a.get(reverse("admin:chatplatform_contextpolicy_changelist")).content
    for name in ("Hybrid", "Sliding window", "Rolling summary"):
        assert copy_url(preset(name)) in body.decode()
    assert 'formaction="' in body.decode()


def test_a_tenant_admin_cannot_copy_into_another_tenant_nor_copy_its_policies(
    admin_client_a, tenant_a, tenant_b
):
    response = admin_client_a.post(copy_url(preset()), {"copy_tenant": tenant_b.pk})
    assert response.status_code == 302 and response["Location"] == change_url(preset())
    assert texts(response) == ["You do not administer that tenant."]
    assert policies_of(tenant_b) == [] and policies_of(tenant_a) == []

    theirs = make_policy(tenant_b, name="Theirs")
    assert admin_client_a.post(copy_url(theirs)).status_code == 404
    assert [p.name for p in policies_of(tenant_b)] == ["Theirs"]
    assert admin_client_a.get(copy_url(preset())).status_code == 405  # a copy is a POST


def test_the_service_refuses_to_copy_a_tenants_policy_into_another_tenant(tenant_a, tenant_b):
    theirs = make_policy(tenant_b, name="Theirs")
    with pytest.raises(PolicyNotAllowed):
        policy_copy(policy=theirs, tenant=tenant_a)
    own = policy_copy(policy=make_policy(tenant_a, name="Mine"), tenant=tenant_a)
    assert own.name == "Mine (copy)" and own.tenant_id == tenant_a.pk


def test_an_admin_of_several_tenants_chooses_where_the_copy_goes(client, tenant_a, tenant_b):
    both = make_admin(tenant_a, username="admin-both")
    membership_add(tenant=tenant_b, user=both, role="admin")
    client.force_login(both)
    page = client.get(change_url(preset())).content.decode()
    assert 'name="copy_tenant"' in page and f'value="{tenant_b.pk}"' in page
    unchosen = client.post(copy_url(preset()))
    assert texts(unchosen) == ["Choose the tenant to copy the policy into."]
    client.post(copy_url(preset()), {"copy_tenant": tenant_b.pk})
    assert [p.name for p in policies_of(tenant_b)] == ["Hybrid (copy)"]
    assert policies_of(tenant_a) == []


def test_save_as_new_is_hidden_on_a_read_only_preset_and_its_post_copies_the_preset(
    admin_client_a, tenant_a
):
    hybrid = preset()
    page = admin_client_a.get(change_url(hybrid))
    assert 'name="_saveasnew"' not in page.content.decode()
    # A post of the read-only page (no fields) makes a copy, not a form with 31 errors.
    response = admin_client_a.post(change_url(hybrid), {"_saveasnew": "Save as new"})
    [copy] = policies_of(tenant_a)
    assert response.status_code == 302 and response["Location"] == change_url(copy)
    assert policy_settings(copy) == policy_settings(hybrid)
    # On the tenant's own policy the page holds the form: "Save as new" stays.
    own = admin_client_a.get(change_url(copy)).content.decode()
    assert 'name="_saveasnew"' in own


def test_the_add_form_starts_from_the_default_presets_values(admin_client_a, tenant_a):
    hybrid = preset()
    response = admin_client_a.get(reverse("admin:chatplatform_contextpolicy_add"))
    form = response.context["adminform"].form
    expected = policy_settings(hybrid)
    expected.pop("description")
    for name, value in expected.items():
        assert form[name].value() == value, name
    assert form["tenant"].value() == tenant_a.pk


def test_the_add_form_takes_an_edited_default_preset(admin_client_a):
    with all_tenants():
        ContextPolicy.objects.filter(pk=preset().pk).update(facts_budget=1500)
    response = admin_client_a.get(reverse("admin:chatplatform_contextpolicy_add"))
    assert response.context["adminform"].form["facts_budget"].value() == 1500


def test_field_defaults_presets_and_builders_agree(presets):
    """One set of defaults: the stored default preset (data migrations) holds the policy's field
    defaults, and the test builders use them."""
    defaults = {
        field.name: field.get_default()
        for field in ContextPolicy._meta.concrete_fields
        if field.has_default()
    }
    stored = policy_settings(preset())
    assert {name: stored[name] for name in defaults} == defaults
    assert {name: stored[name] for name in POLICY_DEFAULTS} == POLICY_DEFAULTS
