"""The admin log-in follows the admin role: promoting a member in the admin lets them in,
demoting or removing the last admin membership takes it away (superusers keep it)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from chatplatform.models import MembershipRole
from chatplatform.services import membership_add
from tests.factories import make_tenant, membership_of

pytestmark = pytest.mark.django_db


def change_url(membership) -> str:
    return reverse("admin:chatplatform_membership_change", args=[membership.pk])


def enters_admin(user) -> bool:
    user.refresh_from_db()
    client = Client()
    client.force_login(user)
    return client.get("/admin/").status_code == 200


def admin_login_works(user) -> bool:
    user.set_password("pw")
    user.save()
    client = Client()
    response = client.post(
        "/admin/login/?next=/admin/", {"username": user.username, "password": "pw"}
    )
    return response.status_code == 302 and response["Location"] == "/admin/"


@pytest.fixture
def admin_client_a(client, admin_a):
    client.force_login(admin_a)
    return client


def set_role(admin_client, membership, role: str):
    return admin_client.post(
        change_url(membership),
        {"tenant": membership.tenant_id, "user": membership.user_id, "role": role},
    )


def test_promoting_in_the_admin_lets_the_member_in_and_demoting_takes_it_away(
    admin_client_a, tenant_a, member_a
):
    membership = membership_of(tenant_a, member_a)
    assert not enters_admin(member_a)

    assert set_role(admin_client_a, membership, MembershipRole.ADMIN).status_code == 302
    member_a.refresh_from_db()
    assert member_a.is_staff
    assert enters_admin(member_a)
    assert admin_login_works(member_a)

    assert set_role(admin_client_a, membership, MembershipRole.MEMBER).status_code == 302
    member_a.refresh_from_db()
    assert not member_a.is_staff
    assert not enters_admin(member_a)


def test_removing_the_admin_membership_takes_the_admin_away(admin_client_a, tenant_a, member_a):
    membership = membership_add(tenant=tenant_a, user=member_a, role=MembershipRole.ADMIN)
    assert enters_admin(member_a)
    delete = reverse("admin:chatplatform_membership_delete", args=[membership.pk])
    assert admin_client_a.post(delete, {"post": "yes"}).status_code == 302
    member_a.refresh_from_db()
    assert not member_a.is_staff


def test_bulk_removal_takes_the_admin_away(admin_client_a, tenant_a, member_a):
    membership = membership_add(tenant=tenant_a, user=member_a, role=MembershipRole.ADMIN)
    admin_client_a.post(
        reverse("admin:chatplatform_membership_changelist"),
        {"action": "delete_selected", "_selected_action": [membership.pk], "post": "yes"},
    )
    member_a.refresh_from_db()
    assert not member_a.is_staff


def test_an_admin_of_another_tenant_and_a_superuser_keep_the_staff_flag(
    admin_client_a, tenant_a, member_a, django_user_model
):
    other = make_tenant("Other")
    membership_add(tenant=other, user=member_a, role=MembershipRole.ADMIN)
    membership = membership_add(tenant=tenant_a, user=member_a, role=MembershipRole.ADMIN)
    set_role(admin_client_a, membership, MembershipRole.MEMBER)
    member_a.refresh_from_db()
    assert member_a.is_staff  # still the admin of "Other"

    root = django_user_model.objects.create_superuser("root", "r@example.com", "pw")
    membership = membership_add(tenant=tenant_a, user=root, role=MembershipRole.ADMIN)
    set_role(admin_client_a, membership, MembershipRole.MEMBER)
    root.refresh_from_db()
    assert root.is_staff
