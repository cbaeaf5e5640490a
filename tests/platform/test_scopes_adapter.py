"""The adapter over django-scopes' internals (:mod:`chatplatform.tenancy.scopes_adapter`)
still matches the installed django-scopes: the scope state it reads is what ``scope`` and
``scopes_disabled`` set, and the refusing queryset refuses."""

from __future__ import annotations

import pytest
from django_scopes import scope, scopes_disabled
from django_scopes.exceptions import ScopeError

from chatplatform.models import Tenant
from chatplatform.tenancy.scopes_adapter import (
    active_scope,
    refuse_if_refusing,
    refusing_queryset,
)


def test_the_state_follows_scope_and_scopes_disabled():
    def tenant() -> object:
        state = active_scope()
        assert state is not None
        return state.get("tenant")

    assert tenant() is None
    with scope(tenant=3):
        assert tenant() == 3
        with scopes_disabled():
            assert active_scope() is None
        assert tenant() == 3
    assert tenant() is None


def test_the_refusing_queryset_refuses_every_query():
    queryset = refusing_queryset(Tenant, None, "tenant")
    with pytest.raises(ScopeError, match="tenant"):
        list(queryset)
    with pytest.raises(ScopeError, match="tenant"):
        queryset.filter(pk=1)
    with pytest.raises(ScopeError, match="tenant"):
        refuse_if_refusing(queryset)
    refuse_if_refusing(Tenant.objects.none())  # any other queryset passes
