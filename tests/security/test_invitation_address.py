"""An invitation sent to an e-mail address is for that address only.

A logged-in account with another address used to join the tenant with a link that was e-mailed
to someone else (forwarded, leaked, read over a shoulder). Now the accept page tells such an
account that the invitation is someone else's (403) and joins nothing, whether it is opened or
submitted, and the service refuses it too; the invitation stays usable by its addressee. The
address is compared without regard to case. A link invitation (no address) stays open to
whoever holds it, as documented."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

from chatplatform.invitations import InvitationUnusable, invitation_accept, invitation_create
from chatplatform.models import Invitation, InvitationStatus, Membership
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_limits():
    cache.clear()
    yield
    cache.clear()


def invite(tenant, admin, email: str = ""):
    return invitation_create(
        tenant=tenant, invited_by=admin, base_url="http://testserver/", email=email
    )


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def joined(tenant, user) -> bool:
    with all_tenants():
        return Membership.objects.filter(tenant=tenant, user=user).exists()


def status_of(invitation) -> str:
    with tenant_scope(invitation.tenant_id):
        return Invitation.objects.get(pk=invitation.pk).status


def test_another_account_cannot_accept_an_invitation_sent_to_an_address(tenant_a, admin_a):
    invitation, link = invite(tenant_a, admin_a, "carol@example.com")
    eve = UserFactory(username="eve", email="eve@example.com")
    browser = logged_in(eve)

    page = browser.get(link)
    assert page.status_code == 403
    assert b"for another e-mail address" in page.content
    assert b"Join " + tenant_a.name.encode() + b"</button>" not in page.content
    submitted = browser.post(link)
    assert submitted.status_code == 403

    assert not joined(tenant_a, eve)
    assert status_of(invitation) == InvitationStatus.PENDING
    token = link.rstrip("/").rsplit("/", 1)[-1]
    with pytest.raises(InvitationUnusable) as refused:
        invitation_accept(raw_token=token, user=eve)
    assert refused.value.reason == "other_address"
    assert not joined(tenant_a, eve)


def test_an_account_without_an_address_cannot_accept_one_either(tenant_a, admin_a):
    _invitation, link = invite(tenant_a, admin_a, "carol@example.com")
    nobody = UserFactory(username="no-address", email="")
    assert logged_in(nobody).post(link).status_code == 403
    assert not joined(tenant_a, nobody)


def test_the_addressee_accepts_whatever_the_case_of_the_address(tenant_a, admin_a):
    invitation, link = invite(tenant_a, admin_a, "Carol@Example.com")
    carol = UserFactory(username="carol", email="carol@EXAMPLE.com")
    browser = logged_in(carol)
    page = browser.get(link)
    assert page.status_code == 200 and b"logged in as" in page.content
    assert browser.post(link).status_code == 302
    assert joined(tenant_a, carol)
    assert status_of(invitation) == InvitationStatus.ACCEPTED


def test_a_link_invitation_stays_open_to_whoever_holds_it(tenant_a, admin_a):
    _invitation, link = invite(tenant_a, admin_a)
    anyone = UserFactory(username="anyone", email="anyone@example.org")
    assert logged_in(anyone).post(link).status_code == 302
    assert joined(tenant_a, anyone)
