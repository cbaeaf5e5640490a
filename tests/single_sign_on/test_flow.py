"""The whole log-in through the fake OpenID provider: success, every refusal, membership."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import SESSION_KEY, get_user_model
from django.test import Client
from django.urls import reverse

from chatplatform.models import AuditAction, AuditEvent, Membership, MembershipRole
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from tests.factories import UserFactory, make_member
from tests.fakes.openid_provider import FakeOpenIDProvider

from .conftest import make_provider, provider_url, sso_login, through_provider

pytestmark = pytest.mark.django_db(transaction=False)
User = get_user_model()


def memberships_of(email: str) -> list[tuple[int, str]]:
    with all_tenants():
        return sorted(Membership.objects.filter(user__email=email).values_list("tenant_id", "role"))


def failures() -> list[Any]:
    with all_tenants():
        return list(
            AuditEvent.objects.filter(action=AuditAction.LOGIN_FAILED).values(
                "tenant_id", "changes"
            )
        )


def test_a_new_address_gets_a_user_and_a_membership_with_the_default_role(
    op: FakeOpenIDProvider, tenant_a
):
    make_provider(tenant_a, op.issuer, role=MembershipRole.ADMIN)
    client = Client()
    response = sso_login(client, tenant_a.slug)
    assert response.status_code == 302
    assert response["Location"] == reverse("chats_ui:conversation_list")
    user = User.objects.get(email="ada@acme.example")
    assert not user.has_usable_password()
    assert client.session[SESSION_KEY] == str(user.pk)
    assert memberships_of("ada@acme.example") == [(tenant_a.pk, MembershipRole.ADMIN)]
    # The code went to the token endpoint with the secret (basic) and the PKCE verifier.
    (token_request,) = op.token_requests
    assert token_request.authorization.startswith("Basic ")
    assert token_request.form["code_verifier"]
    assert token_request.status == 200
    # The chats open in the tenant just joined.
    assert client.get(response["Location"], follow=True).status_code == 200


def test_an_existing_user_joins_and_an_existing_membership_keeps_its_role(
    op: FakeOpenIDProvider, tenant_a, tenant_b
):
    make_provider(tenant_a, op.issuer)
    existing = make_member(tenant_b, username="ada", email="Ada@acme.example")
    response = sso_login(Client(), tenant_a.slug)
    assert response.status_code == 302
    assert User.objects.filter(email__iexact="ada@acme.example").count() == 1
    assert memberships_of("Ada@acme.example") == sorted(
        [(tenant_a.pk, MembershipRole.MEMBER), (tenant_b.pk, MembershipRole.MEMBER)]
    )
    with tenant_scope(tenant_a):
        Membership.objects.filter(user=existing).update(role=MembershipRole.ADMIN)
    assert sso_login(Client(), tenant_a.slug).status_code == 302
    with tenant_scope(tenant_a):
        assert Membership.objects.get(user=existing).role == MembershipRole.ADMIN


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        ("wrong_issuer", "id_token_issuer"),
        ("wrong_audience", "id_token_audience"),
        ("expired", "id_token_expired"),
        ("wrong_nonce", "id_token_nonce"),
        ("bad_signature", "id_token_signature:bad_signature"),
        ("unverified_email", "email_unverified"),
    ],
)
def test_a_bad_id_token_is_refused_and_nothing_is_created(
    op: FakeOpenIDProvider, tenant_a, fault: str, code: str
):
    make_provider(tenant_a, op.issuer)
    setattr(op.faults, fault, True)
    client = Client()
    response = sso_login(client, tenant_a.slug)
    assert response.status_code == 403
    assert b"Back to log in" in response.content
    assert SESSION_KEY not in client.session
    assert not User.objects.filter(email="ada@acme.example").exists()
    assert failures() == [{"tenant_id": tenant_a.pk, "changes": {"single sign-on": [None, code]}}]


def test_email_verified_absent_counts_as_verified(op: FakeOpenIDProvider, tenant_a):
    make_provider(tenant_a, op.issuer)
    op.faults.no_email_verified = True
    assert sso_login(Client(), tenant_a.slug).status_code == 302


def test_a_code_with_another_verifier_is_refused_by_the_provider(op: FakeOpenIDProvider, tenant_a):
    make_provider(tenant_a, op.issuer)
    client = Client()
    start = client.get(f"/accounts/sso/{tenant_a.slug}/")
    session = client.session
    session["sso_pending"] = {**session["sso_pending"], "code_verifier": "x" * 64}
    session.save()
    response = through_provider(client, start)
    assert response.status_code == 403
    assert op.token_requests[0].status == 400
    assert not User.objects.filter(email="ada@acme.example").exists()
    assert failures()[0]["changes"] == {"single sign-on": [None, "token_refused:invalid_grant"]}


def test_a_state_that_is_not_the_sessions_is_refused(op: FakeOpenIDProvider, tenant_a):
    make_provider(tenant_a, op.issuer)
    client = Client()
    start = client.get(f"/accounts/sso/{tenant_a.slug}/")
    other = Client()  # another browser brings the code back: it started nothing
    response = through_provider(other, start)
    assert response.status_code == 400
    assert op.token_requests == []
    assert failures()[0]["changes"] == {"single sign-on": [None, "state"]}


def test_a_domain_not_on_the_list_is_refused(op: FakeOpenIDProvider, tenant_a):
    make_provider(tenant_a, op.issuer, domains="acme.example")
    op.who = "eve@elsewhere.example"
    response = sso_login(Client(), tenant_a.slug)
    assert response.status_code == 403
    assert b"domain" in response.content
    assert not User.objects.filter(email="eve@elsewhere.example").exists()


def test_switched_off_and_missing_look_the_same(op: FakeOpenIDProvider, tenant_a, tenant_b):
    make_provider(tenant_a, op.issuer, enabled=False)
    off = Client().get(f"/accounts/sso/{tenant_a.slug}/")
    none = Client().get(f"/accounts/sso/{tenant_b.slug}/")
    unknown = Client().get("/accounts/sso/no-such-tenant/")
    assert off.status_code == none.status_code == unknown.status_code == 404
    assert off.content == none.content == unknown.content
    assert op.discovery_requests == 0


def test_the_login_page_email_picks_the_tenants_provider(op: FakeOpenIDProvider, tenant_a):
    make_provider(tenant_a, op.issuer, domains="acme.example\nacme.test")
    client = Client()
    page = client.get("/accounts/login/")
    assert b'name="sso_email"' in page.content
    start = client.post("/accounts/sso/", {"sso_email": "ada@ACME.example", "next": "/"})
    assert start.status_code == 200 and provider_url(start).startswith(op.url)
    assert through_provider(client, start).status_code == 302


@pytest.mark.parametrize(
    ("next_url", "lands"), [("/memories/", "/memories/"), ("https://evil.example/", None)]
)
def test_next_is_followed_only_on_this_site(
    op: FakeOpenIDProvider, tenant_a, next_url: str, lands: str | None
):
    make_provider(tenant_a, op.issuer)
    client = Client()
    start = client.post("/accounts/sso/", {"sso_email": "ada@acme.example", "next": next_url})
    response = through_provider(client, start)
    assert response["Location"] == (lands or reverse("chats_ui:conversation_list"))


def test_an_unknown_domain_and_one_without_sso_get_the_same_message(
    op: FakeOpenIDProvider, tenant_a
):
    make_provider(tenant_a, op.issuer, domains="acme.example", enabled=False)
    off = Client().post("/accounts/sso/", {"sso_email": "ada@acme.example"})
    unknown = Client().post("/accounts/sso/", {"sso_email": "ada@nowhere.example"})
    assert off.status_code == unknown.status_code == 200
    for response in (off, unknown):
        assert b"Single sign-on is not set up for this address" in response.content


def test_discovery_is_cached(op: FakeOpenIDProvider, tenant_a):
    make_provider(tenant_a, op.issuer)
    sso_login(Client(), tenant_a.slug)
    sso_login(Client(), tenant_a.slug)
    assert op.discovery_requests == 1


def test_a_loopback_issuer_is_refused_unless_the_operator_allows_it(
    op: FakeOpenIDProvider, tenant_a, settings
):
    provider = make_provider(tenant_a, op.issuer)
    settings.SSO_ALLOW_PRIVATE_NETWORKS = False
    response = Client().get(f"/accounts/sso/{tenant_a.slug}/")
    assert response.status_code == 503
    assert op.discovery_requests == 0
    with all_tenants():
        event = AuditEvent.objects.get(action=AuditAction.ENDPOINT_REFUSED)
    assert event.tenant_id == tenant_a.pk
    assert event.target_id == str(provider.pk)
    assert "loopback" in event.changes["reason"][1] or "private" in event.changes["reason"][1]
    settings.SSO_ALLOW_PRIVATE_NETWORKS = True
    assert Client().get(f"/accounts/sso/{tenant_a.slug}/").status_code == 302


def test_no_provider_hosts_means_no_sso(op: FakeOpenIDProvider, tenant_a, settings):
    make_provider(tenant_a, op.issuer)
    settings.SSO_PROVIDER_HOSTS = []
    assert Client().get(f"/accounts/sso/{tenant_a.slug}/").status_code == 503
    assert op.discovery_requests == 0


def test_the_operators_account_never_logs_in_by_sso(op: FakeOpenIDProvider, tenant_a):
    make_provider(tenant_a, op.issuer)
    UserFactory(username="root", email="ada@acme.example", is_superuser=True, is_staff=True)
    client = Client()
    assert sso_login(client, tenant_a.slug).status_code == 403
    assert SESSION_KEY not in client.session
    assert memberships_of("ada@acme.example") == []
