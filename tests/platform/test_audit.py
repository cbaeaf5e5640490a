"""The audit log: every admin change with who, when, from where and each changed field's
value before and after (secrets only as changed), "make active" and revocations, failed
log-ins and lock-outs; read-only, scoped to the tenant for its admin, exported as JSON lines."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from chatplatform.models import AuditAction, AuditEvent, ContextPolicy, MembershipRole
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from tests.factories import make_policy, membership_of, policy_form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_a(client, admin_a):
    client.force_login(admin_a)
    return client


def events(**filters) -> list[AuditEvent]:
    with all_tenants():
        return list(AuditEvent.objects.filter(**filters).order_by("pk"))


def entry(**values) -> AuditEvent:
    with all_tenants():
        return AuditEvent.objects.create(**values)


def test_a_policy_change_is_recorded_with_before_and_after(admin_client_a, admin_a, tenant_a):
    policy = make_policy(tenant_a, name="Careful")
    url = reverse("admin:chatplatform_contextpolicy_change", args=[policy.pk])
    data = policy_form_data(tenant_a, name="Careful", retrieval_budget=1234)
    response = admin_client_a.post(url, data, HTTP_USER_AGENT="Browser/1.0")
    assert response.status_code == 302, response.context["adminform"].form.errors
    (event,) = events(action=AuditAction.CHANGED, target_type="chatplatform.contextpolicy")
    assert event.changes["retrieval_budget"] == [policy.retrieval_budget, 1234]
    assert "name" not in event.changes
    assert (event.actor, event.actor_label, event.tenant_id) == (
        admin_a,
        admin_a.username,
        tenant_a.pk,
    )
    assert (event.ip_address, event.user_agent) == ("127.0.0.1", "Browser/1.0")
    policy.refresh_from_db()
    assert event.target_id == str(policy.pk) and event.target_label == str(policy)


def test_a_role_change_and_a_removal_are_recorded(admin_client_a, tenant_a, member_a):
    membership = membership_of(tenant_a, member_a)
    url = reverse("admin:chatplatform_membership_change", args=[membership.pk])
    data = {"tenant": tenant_a.pk, "user": member_a.pk, "role": MembershipRole.ADMIN}
    assert admin_client_a.post(url, data).status_code == 302
    (changed,) = events(action=AuditAction.CHANGED)
    assert changed.changes == {"role": ["member", "admin"]}
    membership.refresh_from_db()
    delete = reverse("admin:chatplatform_membership_delete", args=[membership.pk])
    assert admin_client_a.post(delete, {"post": "yes"}).status_code == 302
    (deleted,) = events(action=AuditAction.DELETED)
    assert deleted.target_label == str(membership) and deleted.tenant_id == tenant_a.pk


def test_make_active_and_key_revocation_are_recorded(admin_client_a, tenant_a, admin_a):
    policy = make_policy(tenant_a, name="Next")
    with tenant_scope(tenant_a):
        previous = str(tenant_a.active_policy)
    admin_client_a.post(
        reverse("admin:chatplatform_contextpolicy_changelist"),
        {"action": "make_active", "_selected_action": [policy.pk]},
    )
    (activated,) = events(target_type="chatplatform.tenant")
    assert activated.changes == {"active_policy": [previous, str(policy)]}
    key, raw = api_key_create(tenant=tenant_a, name="ci", user=admin_a)
    admin_client_a.post(
        reverse("admin:chatplatform_apikey_changelist"),
        {"action": "revoke", "_selected_action": [key.pk]},
    )
    (revoked,) = events(target_type="chatplatform.apikey")
    assert revoked.changes == {"revoked": [False, True]}
    assert raw not in json.dumps([e.changes for e in events()])


def test_a_new_key_is_recorded_without_its_secret(admin_client_a, tenant_a, admin_a):
    url = reverse("admin:chatplatform_apikey_add")
    data = {"tenant": tenant_a.pk, "name": "deploy", "user": admin_a.pk, "role": "member"}
    response = admin_client_a.post(url, data, follow=True)
    shown = " ".join(str(m) for m in response.context["messages"])
    raw = shown.split("copy it now): ")[1].split()[0]
    (created,) = events(action=AuditAction.CREATED)
    assert created.target_type == "chatplatform.apikey"
    assert set(created.changes) == {"tenant", "name", "user", "role"}
    assert created.changes["name"] == [None, "deploy"]
    assert raw[:12] not in json.dumps(created.changes) + created.target_label


def test_a_secret_field_is_recorded_only_as_changed():
    from chatplatform.audit import field_changes

    assert field_changes(
        ["api_key", "password1", "name"], {"name": "a"}, {"name": "b", "api_key": "k"}
    ) == {
        "api_key": ["(changed)", "(changed)"],
        "password1": ["(changed)", "(changed)"],
        "name": ["a", "b"],
    }


def test_failed_log_ins_and_the_lock_out_are_recorded(db, settings, admin_a):
    settings.AXES_FAILURE_LIMIT = 2
    browser = Client(REMOTE_ADDR="203.0.113.9")
    for _ in range(2):
        browser.post("/accounts/login/", {"username": admin_a.username, "password": "wrong"})
    failed = events(action=AuditAction.LOGIN_FAILED)
    assert [e.actor_label for e in failed] == [admin_a.username] * 2
    assert {e.ip_address for e in failed} == {"203.0.113.9"}
    assert all(e.tenant_id is None and e.actor is None for e in failed)
    assert events(action=AuditAction.LOCKED_OUT)[0].actor_label == admin_a.username


def test_the_log_is_read_only_and_a_tenant_admin_sees_only_their_tenants(
    admin_client_a, tenant_a, tenant_b, admin_a, django_user_model
):
    make_policy(tenant_a, name="Ours")
    mine = entry(tenant=tenant_a, action=AuditAction.CHANGED, target_label="ours")
    theirs = entry(tenant=tenant_b, action=AuditAction.CHANGED, target_label="theirs")
    platform = entry(action=AuditAction.LOGIN_FAILED, actor_label="root")
    listing = admin_client_a.get(reverse("admin:chatplatform_auditevent_changelist"))
    assert listing.status_code == 200
    shown = {e.pk for e in listing.context["cl"].result_list}
    assert shown == {mine.pk}
    change = reverse("admin:chatplatform_auditevent_change", args=[theirs.pk])
    assert admin_client_a.get(change).status_code in (302, 404)
    mine_url = reverse("admin:chatplatform_auditevent_change", args=[mine.pk])
    assert admin_client_a.post(mine_url, {"target_label": "edited"}).status_code == 403
    assert admin_client_a.get(reverse("admin:chatplatform_auditevent_add")).status_code == 403
    delete = reverse("admin:chatplatform_auditevent_delete", args=[mine.pk])
    assert admin_client_a.post(delete, {"post": "yes"}).status_code == 403
    with all_tenants():
        mine.refresh_from_db()
    assert mine.target_label == "ours"

    root = django_user_model.objects.create_superuser("root", "r@example.com", "pw")
    operator = Client()
    operator.force_login(root)
    listing = operator.get(reverse("admin:chatplatform_auditevent_changelist"))
    assert {e.pk for e in listing.context["cl"].result_list} >= {mine.pk, theirs.pk, platform.pk}


def test_selected_entries_export_as_json_lines(admin_client_a, tenant_a, tenant_b):
    first = entry(
        tenant=tenant_a, action=AuditAction.CHANGED, changes={"role": ["member", "admin"]}
    )
    second = entry(tenant=tenant_a, action=AuditAction.DELETED)
    theirs = entry(tenant=tenant_b, action=AuditAction.DELETED)
    response = admin_client_a.post(
        reverse("admin:chatplatform_auditevent_changelist"),
        {"action": "export_json_lines", "_selected_action": [second.pk, first.pk, theirs.pk]},
    )
    assert response["Content-Type"] == "application/jsonl"
    lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert [line["id"] for line in lines] == [first.pk, second.pk]
    assert lines[0]["changes"] == {"role": ["member", "admin"]}
    assert lines[0]["tenant_id"] == tenant_a.pk and "T" in lines[0]["created_at"]


def test_a_change_that_fails_leaves_no_entry(admin_client_a, tenant_a):
    url = reverse("admin:chatplatform_contextpolicy_add")
    response = admin_client_a.post(url, policy_form_data(tenant_a, name="x", max_context_tokens=-1))
    assert response.status_code == 200
    assert not events()
    with tenant_scope(tenant_a):
        assert not ContextPolicy.objects.filter(name="x").exists()


def test_an_operator_change_to_a_user_is_recorded(django_user_model, member_a):
    root = django_user_model.objects.create_superuser("root", "r@example.com", "pw")
    operator = Client()
    operator.force_login(root)
    url = reverse("admin:auth_user_password_change", args=[member_a.pk])
    response = operator.post(
        url,
        {
            "password1": "A-long-new-pass-9",
            "password2": "A-long-new-pass-9",
            "usable_password": "true",
        },
    )
    assert response.status_code == 302
    (event,) = events(target_type="auth.user")
    assert "A-long-new-pass-9" not in json.dumps(event.changes)
    assert event.actor == root


def test_a_key_used_from_a_new_address_is_recorded_once_per_address(tenant_a, member_a):
    from chatplatform.apikeys import authenticate_api_key

    key, raw = api_key_create(tenant=tenant_a, name="ci", user=member_a)
    for address in ("203.0.113.5", "203.0.113.5", "198.51.100.7", "203.0.113.5"):
        assert authenticate_api_key(raw, address) is not None
    assert authenticate_api_key(raw) is not None  # no address known: nothing to compare
    used = events(action=AuditAction.KEY_NEW_ADDRESS)
    assert [(e.ip_address, e.changes["address"][1]) for e in used] == [
        ("203.0.113.5", "203.0.113.5"),
        ("198.51.100.7", "198.51.100.7"),
    ]
    assert all(e.tenant_id == tenant_a.pk and e.target_id == str(key.pk) for e in used)
    assert used[0].actor == member_a
