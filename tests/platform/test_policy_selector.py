"""The one selector for the policy of a turn: the conversation's own, else the tenant's active
policy, else the default preset; a short-lived per-process copy, bypassed when asked."""

from __future__ import annotations

import pytest

from chatplatform.models import ContextPolicy, Tenant
from chatplatform.policies import DEFAULT_PRESET, active_policy, policy_for
from chatplatform.tenancy.scoping import all_tenants
from chats.services import conversation_create

pytestmark = pytest.mark.django_db


def preset(name: str) -> ContextPolicy:
    return ContextPolicy._base_manager.get(tenant__isnull=True, name=name)


def test_own_policy_then_active_then_default_preset(tenant_a, member_a):
    with all_tenants():
        Tenant.objects.filter(pk=tenant_a.pk).update(active_policy=None)
    conversation = conversation_create(tenant=tenant_a, created_by=member_a)
    assert policy_for(conversation).name == DEFAULT_PRESET
    tenant_a.active_policy = preset("Sliding window")
    tenant_a.save()  # saving clears this process's copies
    assert policy_for(conversation).name == "Sliding window"
    assert active_policy(tenant_a).name == "Sliding window"
    conversation.policy = preset("Rolling summary")
    assert policy_for(conversation).name == "Rolling summary"
    assert active_policy(tenant_a.pk).name == "Sliding window"


def test_a_fresh_read_sees_a_change_the_copy_has_not_seen_yet(tenant_a):
    tenant_a.active_policy = preset("Sliding window")
    tenant_a.save()
    assert active_policy(tenant_a).name == "Sliding window"
    with all_tenants():  # another process's change: no signal reaches this one
        Tenant.objects.filter(pk=tenant_a.pk).update(active_policy=preset("Rolling summary"))
    assert active_policy(tenant_a).name == "Sliding window"
    assert active_policy(tenant_a, fresh=True).name == "Rolling summary"
