"""``manage.py create_tenant``: the first tenant of an install and its admin, who sets a
password through the printed one-time link and then logs in to the tenant; with --api-key a key
acting as the admin, alone on the last line. A second run for the same tenant changes nothing."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command, execute_from_command_line
from django.urls import reverse
from rest_framework.test import APIClient

from chatplatform.models import ApiKey, ContextPolicy, Membership, MembershipRole, Tenant
from chatplatform.policies import DEFAULT_PRESET
from chatplatform.tenancy.scoping import all_tenants

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-first-passphrase-17"


def create_tenant(*args: str) -> list[str]:
    out = StringIO()
    call_command("create_tenant", *args, "--url", "http://testserver", stdout=out)
    return out.getvalue().rstrip("\n").splitlines()


def state() -> dict[str, Any]:
    """Everything a run could change."""
    with all_tenants():
        return {
            "tenants": list(Tenant.objects.values_list("slug", "active_policy_id")),
            "users": list(get_user_model().objects.values_list("username", "is_staff", "password")),
            "memberships": list(Membership.objects.values_list("tenant_id", "user_id", "role")),
            "keys": ApiKey.objects.count(),
        }


def set_password_through(client: Any, link: str) -> None:
    assert link.startswith("http://testserver/accounts/reset/")
    form = client.get(link.removeprefix("http://testserver"), follow=True)
    assert b"Choose a new password" in form.content
    done = client.post(
        form.redirect_chain[-1][0], {"new_password1": PASSWORD, "new_password2": PASSWORD}
    )
    assert done.status_code == 302, done.content


def test_a_new_tenant_its_admin_logs_in_through_the_link_and_its_key_works(client, presets):
    lines = create_tenant("Acme Corp", "--admin-email", "Ada@Acme.example", "--api-key")

    with all_tenants():
        tenant = Tenant.objects.get(slug="acme-corp")
        preset = ContextPolicy.objects.get(tenant__isnull=True, name=DEFAULT_PRESET)
        membership = Membership.objects.get(tenant=tenant, role=MembershipRole.ADMIN)
    assert tenant.name == "Acme Corp" and tenant.active_policy_id == preset.pk
    assert tenant.service_user_id is not None  # keys without a member act as it
    admin = membership.user
    assert admin.username == admin.email == "Ada@acme.example"  # the domain in lower case
    assert admin.is_staff and not admin.has_usable_password()

    link = next(line for line in lines if "/accounts/reset/" in line)
    set_password_through(client, link)
    logged_in = client.post(
        reverse("login"), {"username": "Ada@acme.example", "password": PASSWORD}, follow=True
    )
    assert logged_in.redirect_chain[-1][0] == reverse("chats_ui:conversation_list")
    home = client.get("/").content.decode()
    assert "Acme Corp" in home and "No tenant" not in home
    assert client.get("/admin/").status_code == 200
    used_again = client.get(link.removeprefix("http://testserver"), follow=True)
    assert b"This link no longer works" in used_again.content

    key = lines[-1]
    assert key.startswith("cpk_") and " " not in key
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    me = api.get("/api/v1/me/").json()
    assert me["tenant"]["slug"] == "acme-corp"
    assert me["username"] == "Ada@acme.example" and me["is_admin"] is True


def test_an_existing_user_becomes_the_admin_and_no_key_is_made_unasked(client, presets):
    root = get_user_model().objects.create_superuser("root", "root@example.com", "x")
    lines = create_tenant("Beta", "--admin-email", "ROOT@example.com")
    with all_tenants():
        tenant = Tenant.objects.get(slug="beta")
        assert Membership.objects.get(tenant=tenant, role=MembershipRole.ADMIN).user_id == root.pk
        assert not ApiKey.objects.exists()
    assert get_user_model().objects.filter(email__iexact="root@example.com").count() == 1
    assert "existing user" in lines[1] and "optional: they have one" in lines[2]
    assert "/accounts/reset/" in lines[-1]  # without --api-key the link comes last


def test_running_it_again_for_the_same_tenant_is_an_error_and_changes_nothing(presets):
    create_tenant("Acme", "--admin-email", "ada@acme.example", "--api-key")
    before = state()
    for name in ("Acme", "ACME", "acme"):
        with pytest.raises(CommandError, match="exists already"):
            create_tenant(name, "--admin-email", "bob@acme.example", "--api-key")
    assert state() == before
    assert not get_user_model().objects.filter(email="bob@acme.example").exists()


@pytest.mark.parametrize(
    ("name", "email", "message"),
    [("Gamma", "not-an-address", "not a valid e-mail"), ("!!!", "a@b.example", "no usable slug")],
)
def test_bad_input_is_a_clear_error_and_creates_nothing(presets, name, email, message):
    before = state()
    with pytest.raises(CommandError, match=message):
        create_tenant(name, "--admin-email", email)
    assert state() == before


def test_a_failed_run_exits_non_zero(presets: None, capsys: pytest.CaptureFixture[str]) -> None:
    """As ``manage.py`` runs it: a refused run exits with status 1 and says why."""
    create_tenant("Acme", "--admin-email", "ada@acme.example")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        execute_from_command_line(
            ["manage.py", "create_tenant", "Acme", "--admin-email", "x@acme.example"]
        )
    assert exited.value.code == 1
    assert "exists already" in capsys.readouterr().err
