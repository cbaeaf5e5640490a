"""Tenant scoping fails closed, and the schema is distributable by tenant."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.core.exceptions import FieldDoesNotExist
from django.db import models

from chatplatform.models import AuditEvent, ContextPolicy, Membership, ModelProfile
from chatplatform.tenancy.scoping import (
    ScopeError,
    TenantScopedManager,
    all_tenants,
    tenant_scope,
)

PROJECT_APPS = {"chatplatform", "chats", "memory", "summaries"}
# Tenant-level reference data: NULL tenant means "shared by every tenant".
# The audit log's entries without a tenant are the platform's own (failed log-ins).
SHARED_ALLOWED = {AuditEvent, ContextPolicy, ModelProfile}
# Lookups that resolve the tenant from outside it (a log-in, an incoming API key, an opened
# invitation link): with Citus these tables are reference tables, so the lookup stays local
# (see docs/scaling.md).
TENANT_RESOLVING_INDEXES = {"membership_user_idx", "apikey_hash_idx", "invitation_token_idx"}


def tenant_owned_models() -> list[type[models.Model]]:
    found = []
    for model in apps.get_models():
        if model._meta.app_label not in PROJECT_APPS:
            continue
        try:
            model._meta.get_field("tenant")
        except FieldDoesNotExist:
            continue
        found.append(model)
    return found


def test_every_project_model_is_tenant_owned_or_the_tenant_itself():
    owned = set(tenant_owned_models())
    for model in apps.get_models():
        if model._meta.app_label in PROJECT_APPS:
            assert model in owned or model._meta.model_name == "tenant", model


@pytest.mark.parametrize("model", tenant_owned_models(), ids=lambda m: m._meta.label)
def test_tenant_owned_model_has_tenant_id_scoped_manager_and_tenant_in_unique_constraints(model):
    tenant_field = model._meta.get_field("tenant")
    assert tenant_field.column == "tenant_id"
    assert isinstance(model._default_manager, TenantScopedManager)
    assert tenant_field.null == (model in SHARED_ALLOWED)
    for constraint in model._meta.constraints:
        if isinstance(constraint, models.UniqueConstraint):
            shared_only = constraint.condition is not None and "tenant__isnull" in str(
                constraint.condition
            )
            assert "tenant" in constraint.fields or shared_only, (model, constraint.name)
    for field in model._meta.fields:
        assert not (field.unique and not field.primary_key), (model, field.name)
    for index in model._meta.indexes:
        if index.name in TENANT_RESOLVING_INDEXES:
            continue
        assert index.fields[0] == "tenant", (model, index.name)


def test_query_without_tenant_scope_raises(tenant_a, member_a):
    with pytest.raises(ScopeError):
        list(Membership.objects.all())
    with pytest.raises(ScopeError):
        Membership.objects.filter(user=member_a).count()
    with pytest.raises(ScopeError):
        Membership.objects.get(user=member_a)


def test_scope_filters_to_the_tenant(tenant_a, tenant_b, member_a, member_b):
    with tenant_scope(tenant_a):
        users = set(Membership.objects.values_list("user__username", flat=True))
    assert "member-a" in users
    assert "member-b" not in users
    with tenant_scope([tenant_a, tenant_b]):
        users = set(Membership.objects.values_list("user__username", flat=True))
    assert {"member-a", "member-b"} <= users
    with all_tenants():
        assert Membership.objects.filter(user__username__in=["member-a", "member-b"]).count() == 2


def test_empty_scope_returns_nothing(tenant_a, member_a):
    with tenant_scope([]):
        assert Membership.objects.count() == 0


def test_scope_refuses_none():
    with pytest.raises(ScopeError), tenant_scope(None):
        pass


def test_shared_presets_visible_in_every_scope(tenant_a):
    with tenant_scope(tenant_a):
        names = set(ContextPolicy.objects.values_list("name", flat=True))
    assert {"Sliding window", "Rolling summary", "Hybrid"} <= names
