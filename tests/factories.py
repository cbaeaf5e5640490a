"""Factories for test data. Tenant-owned objects are created inside the tenant's scope."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import factory
from django.contrib.auth import get_user_model

from chatplatform.models import Membership, Role, Tenant
from chatplatform.services import membership_add, tenant_create
from chatplatform.tenancy.scoping import tenant_scope
from summaries.models import Summary


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    first_name = factory.Faker("first_name")
    last_name = factory.Faker("last_name")
    password = factory.PostGenerationMethodCall("set_password", "pw")

    @factory.post_generation
    def _save(obj: Any, create: bool, extracted: Any, **kwargs: Any) -> None:
        if create:
            obj.save()


_tenant_counter = iter(range(1, 10**9))


def make_tenant(name: str | None = None, policy_name: str = "Hybrid") -> Tenant:
    n = next(_tenant_counter)
    return tenant_create(name=name or f"Tenant {n}", slug=f"tenant-{n}", policy_name=policy_name)


def make_member(tenant: Tenant, role: str = Role.MEMBER, **user_kwargs: Any) -> Any:
    user = UserFactory(**user_kwargs)
    membership_add(tenant=tenant, user=user, role=role)
    return user


def make_admin(tenant: Tenant, **user_kwargs: Any) -> Any:
    return make_member(tenant, role=Role.ADMIN, **user_kwargs)


def membership_of(tenant: Tenant, user: Any) -> Membership:
    with tenant_scope(tenant):
        return Membership.objects.get(tenant=tenant, user=user)


def summary(
    conversation: Any, first: int, last: int, text: str, kind: str = "rolling", **extra: Any
) -> Any:
    """A stored summary of ``conversation``'s messages ``first..last`` (counted by word)."""
    with tenant_scope(conversation.tenant_id):
        return Summary.objects.create(
            tenant_id=conversation.tenant_id,
            conversation=conversation,
            kind=kind,
            first_seq=first,
            last_seq=last,
            text=text,
            token_count=len(text.split()),
            token_counter="o200k_base",
            model="offline",
            prompt_version="1",
            period_end=datetime(2024, 3, 1, 12, 0, tzinfo=UTC),
            **extra,
        )
