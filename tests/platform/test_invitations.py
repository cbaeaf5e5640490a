"""Invitations: a tenant admin invites by e-mail or link (shown once); the link works once,
expires, can be revoked; accepting makes an account (or adds an existing one) with the
invited role in that tenant only; tenant admins never see or revoke another tenant's
invitations; the accept page is rate-limited per client and says why a link does not work."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from chatplatform.invitations import (
    InvitationNotAllowed,
    InvitationUnusable,
    invitation_accept,
    invitation_create,
    invitation_revoke,
)
from chatplatform.middleware import SESSION_TENANT_KEY
from chatplatform.models import Invitation, Membership, MembershipRole
from chatplatform.models.invitations import hash_invitation_token
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from tests.factories import UserFactory, membership_of

pytestmark = pytest.mark.django_db
PASSWORD = "a-Long-and-unusual-9381"


@pytest.fixture(autouse=True)
def _fresh_limits():
    cache.clear()
    yield
    cache.clear()


def invite(tenant, admin, **kwargs):
    return invitation_create(
        tenant=tenant, invited_by=admin, base_url="http://testserver/", **kwargs
    )


def token_of(link: str) -> str:
    return link.rstrip("/").rsplit("/", 1)[-1]


def signup(client, link, username="newcomer", **extra):
    data = {"username": username, "password1": PASSWORD, "password2": PASSWORD, **extra}
    return client.post(link, data)


def test_the_token_is_stored_only_hashed(tenant_a, admin_a):
    invitation, link = invite(tenant_a, admin_a)
    token = token_of(link)
    assert link == f"http://testserver/invitations/{token}/"
    assert invitation.token_hash == hash_invitation_token(token) != token
    assert invitation.expires_at - timezone.now() > timedelta(days=6, hours=23)
    assert invitation.status == "pending" and invitation.invited_by == admin_a


def test_an_email_is_sent_after_commit_with_the_link(
    tenant_a, admin_a, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        _invitation, link = invite(tenant_a, admin_a, email="ada@example.com")
    assert mail.outbox == []  # nothing before the commit
    for callback in callbacks:
        callback()
    assert len(mail.outbox) == 1
    sent = mail.outbox[0]
    assert sent.to == ["ada@example.com"]
    assert tenant_a.name in sent.subject
    assert link in sent.body


def test_a_new_visitor_creates_an_account_and_lands_in_the_chats(client, tenant_a, admin_a):
    _invitation, link = invite(tenant_a, admin_a, email="ada@example.com")
    page = client.get(link)
    assert page.status_code == 200 and tenant_a.name.encode() in page.content
    assert b'name="email"' not in page.content  # the invitation has the address

    response = signup(client, link, username="ada")
    assert response.status_code == 302
    assert response["Location"] == reverse("chats_ui:conversation_list")
    user = get_user_model().objects.get(username="ada")
    assert user.email == "ada@example.com" and user.check_password(PASSWORD)
    assert membership_of(tenant_a, user).role == MembershipRole.MEMBER
    assert client.session["_auth_user_id"] == str(user.pk)
    assert client.session[SESSION_TENANT_KEY] == tenant_a.pk
    assert client.get(reverse("chats_ui:conversation_list")).status_code == 200


def test_a_link_without_address_asks_for_one_and_checks_the_password(client, tenant_a, admin_a):
    _invitation, link = invite(tenant_a, admin_a, role=MembershipRole.ADMIN)
    weak = client.post(
        link, {"username": "bo", "email": "bo@example.com", "password1": "123", "password2": "123"}
    )
    assert weak.status_code == 200
    assert b"This password is too short" in weak.content
    missing = signup(client, link, username="bo")
    assert b"This field is required" in missing.content

    response = signup(client, link, username="bo", email="bo@example.com")
    assert response.status_code == 302
    with all_tenants():
        membership = Membership.objects.get(user__username="bo")
    assert membership.tenant_id == tenant_a.pk and membership.role == MembershipRole.ADMIN
    assert membership.user.is_staff  # the admin role opens the admin


def test_the_token_works_once(client, tenant_a, admin_a):
    _invitation, link = invite(tenant_a, admin_a)
    assert signup(client, link, username="first", email="f@example.com").status_code == 302
    client.logout()
    again = signup(client, link, username="second", email="s@example.com")
    assert again.status_code == 410
    assert b"used already" in again.content
    with all_tenants():
        assert not Membership.objects.filter(user__username="second").exists()
    assert not get_user_model().objects.filter(username="second").exists()
    with pytest.raises(InvitationUnusable) as used:
        invitation_accept(raw_token=token_of(link), user=UserFactory())
    assert used.value.reason == "accepted"


def test_an_expired_invitation_is_refused(client, tenant_a, admin_a):
    invitation, link = invite(tenant_a, admin_a)
    with tenant_scope(tenant_a):
        Invitation.objects.filter(pk=invitation.pk).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
    response = signup(client, link, email="late@example.com")
    assert response.status_code == 410 and b"expired" in response.content
    assert not get_user_model().objects.filter(username="newcomer").exists()


def test_the_validity_is_configurable(settings, tenant_a, admin_a):
    settings.INVITATION_VALID_DAYS = 2
    invitation, _link = invite(tenant_a, admin_a)
    assert timedelta(days=1, hours=23) < invitation.expires_at - timezone.now() <= timedelta(days=2)


def test_a_revoked_invitation_is_refused(client, tenant_a, admin_a):
    invitation, link = invite(tenant_a, admin_a)
    assert invitation_revoke(invitation=invitation) is True
    assert invitation_revoke(invitation=invitation) is False
    response = client.get(link)
    assert response.status_code == 410 and b"withdrawn" in response.content


def test_an_unknown_token_gets_the_same_page_as_any_unknown(client, tenant_a, admin_a):
    invite(tenant_a, admin_a)
    unknown = client.get("/invitations/not-a-real-token/")
    other = client.get("/invitations/" + "x" * 43 + "/")
    assert unknown.status_code == other.status_code == 404
    assert b"not valid" in unknown.content
    assert unknown.content == other.content


def test_an_existing_user_joins_without_losing_a_higher_role(client, tenant_a, tenant_b, admin_a):
    user: Any = UserFactory()
    _invitation, link = invite(tenant_a, admin_a)
    client.force_login(user)
    page = client.get(link)
    assert page.status_code == 200 and b"logged in as" in page.content
    assert client.post(link).status_code == 302
    assert membership_of(tenant_a, user).role == MembershipRole.MEMBER
    assert client.session[SESSION_TENANT_KEY] == tenant_a.pk

    # An admin accepting a member invitation stays an admin.
    _invitation, link = invite(tenant_a, admin_a)
    client.force_login(admin_a)
    client.post(link)
    assert membership_of(tenant_a, admin_a).role == MembershipRole.ADMIN
    with all_tenants():
        assert not Membership.objects.filter(tenant=tenant_b, user=user).exists()


def test_an_admin_cannot_invite_to_another_tenant(tenant_a, tenant_b, admin_a, member_a):
    with pytest.raises(InvitationNotAllowed):
        invite(tenant_b, admin_a, role=MembershipRole.ADMIN)
    with pytest.raises(InvitationNotAllowed):
        invite(tenant_a, member_a)  # a member is no admin
    with all_tenants():
        assert not Invitation.objects.exists()


def test_accept_is_rate_limited_per_client(client, settings, tenant_a, admin_a):
    settings.INVITATION_CLIENT_LIMIT = 3
    _invitation, link = invite(tenant_a, admin_a)
    for _ in range(3):
        assert client.get("/invitations/guess/").status_code == 404
    limited = client.get(link)
    assert limited.status_code == 429 and b"Too many requests" in limited.content


# --- the admin --------------------------------------------------------------------------------


def admin_url(name, *args):
    return reverse(f"admin:chatplatform_invitation_{name}", args=args)


def test_admin_creates_an_invitation_and_sees_the_link_once(client, tenant_a, admin_a):
    client.force_login(admin_a)
    response = client.post(
        admin_url("add"), {"tenant": tenant_a.pk, "email": "", "role": "member"}, follow=True
    )
    assert response.status_code == 200
    found = re.search(rb'value="(http://testserver/invitations/[^"]+/)"', response.content)
    assert found, response.content.decode()[:2000]
    link = found.group(1).decode()
    with tenant_scope(tenant_a):
        invitation = Invitation.objects.get()
    assert invitation.token_hash == hash_invitation_token(token_of(link))
    assert invitation.invited_by == admin_a
    page = client.get(admin_url("change", invitation.pk))
    assert token_of(link).encode() not in page.content  # shown only once


def test_admin_cannot_invite_to_another_tenant(client, tenant_a, tenant_b, admin_a):
    client.force_login(admin_a)
    response = client.post(admin_url("add"), {"tenant": tenant_b.pk, "role": "admin"})
    assert response.status_code == 200  # the form refuses the choice
    with all_tenants():
        assert not Invitation.objects.exists()


def test_admin_sees_and_revokes_only_their_tenants_invitations(
    client, tenant_a, tenant_b, admin_a, admin_b
):
    ours, _ = invite(tenant_a, admin_a, email="ours@example.com")
    theirs, _ = invite(tenant_b, admin_b, email="theirs@example.com")
    client.force_login(admin_a)
    listing = client.get(admin_url("changelist"))
    assert b"ours@example.com" in listing.content
    assert b"theirs@example.com" not in listing.content
    assert client.get(admin_url("change", theirs.pk)).status_code == 302  # as if missing

    client.post(
        admin_url("changelist"),
        {"action": "revoke", "_selected_action": [ours.pk, theirs.pk]},
    )
    with all_tenants():
        assert Invitation.objects.get(pk=ours.pk).revoked_at is not None
        assert Invitation.objects.get(pk=theirs.pk).revoked_at is None


def test_an_invitation_is_not_edited_once_sent(client, tenant_a, admin_a):
    invitation, _link = invite(tenant_a, admin_a, email="ours@example.com")
    client.force_login(admin_a)
    page = client.get(admin_url("change", invitation.pk))
    assert page.status_code == 200 and b'name="_save"' not in page.content
    posted = client.post(
        admin_url("change", invitation.pk), {"tenant": tenant_a.pk, "role": "admin", "email": ""}
    )
    assert posted.status_code == 403
    with tenant_scope(tenant_a):
        assert Invitation.objects.get(pk=invitation.pk).role == MembershipRole.MEMBER


def test_an_inactive_tenants_link_is_as_unknown(client, tenant_a, admin_a):
    _invitation, link = invite(tenant_a, admin_a)
    tenant_a.is_active = False
    tenant_a.save(update_fields=["is_active"])
    response = client.get(link)
    assert response.status_code == 404 and b"not valid" in response.content
