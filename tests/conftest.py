from __future__ import annotations

import pytest

from tests.factories import make_admin, make_member, make_tenant


@pytest.fixture
def tenant_a(db):
    return make_tenant("Tenant A")


@pytest.fixture
def tenant_b(db):
    return make_tenant("Tenant B")


@pytest.fixture
def admin_a(tenant_a):
    return make_admin(tenant_a, username="admin-a")


@pytest.fixture
def admin_b(tenant_b):
    return make_admin(tenant_b, username="admin-b")


@pytest.fixture
def member_a(tenant_a):
    return make_member(tenant_a, username="member-a")


@pytest.fixture
def member_b(tenant_b):
    return make_member(tenant_b, username="member-b")
