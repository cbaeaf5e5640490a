"""The log-in pages of single sign-on, under ``/accounts/sso/``: thin over the flow
(:mod:`.protocol`) and the membership service (:mod:`.services`).

- ``POST /accounts/sso/`` (the log-in page's e-mail box): the address's domain picks the
  tenant's provider; an unknown domain and one without single sign-on get the same message;
- ``GET /accounts/sso/<tenant-slug>/``: starts the tenant's sign-on;
- ``GET /accounts/sso/<tenant-slug>/callback/``: where the provider sends the browser back
  (the redirect URI to register at the provider).

The user is logged in with Django's ``login()``, as a password log-in does (the session, the
log-in limits' records and the sockets' end at log-out are the same).
"""

from __future__ import annotations

import logging

from django.contrib.auth import REDIRECT_FIELD_NAME, login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.crypto import constant_time_compare
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from chatplatform.middleware import SESSION_TENANT_KEY
from chatplatform.models import IdentityProvider

from .protocol import (
    EndpointRefused,
    PendingSignOn,
    ProviderUnavailable,
    SignOnRefused,
    sign_on_begin,
    sign_on_finish,
)
from .services import (
    endpoint_refused_record,
    identity_provider_for_email,
    identity_provider_for_tenant,
    sign_on_failed_record,
    sign_on_member,
)

logger = logging.getLogger(__name__)

SESSION_PENDING_KEY = "sso_pending"
LOGIN_BACKEND = "django.contrib.auth.backends.ModelBackend"
NOT_OFFERED = "Single sign-on is not set up for this address. Log in with your password."
UNAVAILABLE = (
    "Single sign-on is not available right now. Try again later, or log in with your password."
)


def _next_url(request: HttpRequest, value: str) -> str:
    allowed = url_has_allowed_host_and_scheme(
        value, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return value if value and allowed else ""


def _refused(request: HttpRequest, message: str, *, status: int) -> HttpResponse:
    return render(request, "registration/sso_refused.html", {"message": message}, status=status)


def _begin(
    request: HttpRequest, provider: IdentityProvider, next_url: str, *, from_form: bool = False
) -> HttpResponse:
    callback = reverse("sso_callback", kwargs={"slug": provider.tenant.slug})
    try:
        url, pending = sign_on_begin(
            provider,
            redirect_uri=request.build_absolute_uri(callback),
            next_url=_next_url(request, next_url),
        )
    except EndpointRefused as exc:
        endpoint_refused_record(request, provider=provider, reason=exc.message)
        return _refused(request, UNAVAILABLE, status=503)
    except ProviderUnavailable as exc:
        logger.warning("single sign-on of tenant %s: %s", provider.tenant_id, exc)
        return _refused(request, UNAVAILABLE, status=503)
    request.session[SESSION_PENDING_KEY] = pending.as_session()
    if from_form:
        # The log-in page's policy lets forms send only to this site (CSP form-action, which
        # browsers apply to a form's redirects too): a page moves on to the provider instead.
        return render(request, "registration/sso_continue.html", {"url": url})
    return redirect(url)


@never_cache
@require_POST
def sso_by_email_view(request: HttpRequest) -> HttpResponse:
    email = request.POST.get("sso_email", "")[:254]
    next_url = request.POST.get(REDIRECT_FIELD_NAME, "")
    provider = identity_provider_for_email(email)
    if provider is None:
        context = {"sso_error": NOT_OFFERED, "sso_email": email, "next": next_url}
        return render(request, "registration/login.html", context, status=200)
    return _begin(request, provider, next_url, from_form=True)


@never_cache
@require_GET
def sso_start_view(request: HttpRequest, slug: str) -> HttpResponse:
    provider = identity_provider_for_tenant(slug)
    if provider is None:
        return _refused(request, NOT_OFFERED, status=404)
    return _begin(request, provider, request.GET.get(REDIRECT_FIELD_NAME, ""))


@never_cache
@require_GET
def sso_callback_view(request: HttpRequest, slug: str) -> HttpResponse:
    pending = PendingSignOn.from_session(request.session.pop(SESSION_PENDING_KEY, None))
    provider = identity_provider_for_tenant(slug)
    if provider is None:
        return _refused(request, NOT_OFFERED, status=404)
    state = request.GET.get("state", "")
    if (
        pending is None
        or pending.tenant_id != provider.tenant_id
        or not constant_time_compare(pending.state, state)
    ):
        sign_on_failed_record(request, provider=provider, code="state")
        return _refused(request, "This log-in link has expired. Start again.", status=400)
    if request.GET.get("error") or not request.GET.get("code"):
        code = f"provider_error:{request.GET.get('error', 'no code')}"[:80]
        sign_on_failed_record(request, provider=provider, code=code)
        return _refused(request, "Your identity provider did not log you in.", status=403)
    try:
        identity = sign_on_finish(provider, pending, code=request.GET["code"])
        user, membership = sign_on_member(provider=provider, identity=identity)
    except SignOnRefused as exc:
        sign_on_failed_record(request, provider=provider, code=exc.code)
        return _refused(request, exc.message, status=403)
    except EndpointRefused as exc:
        endpoint_refused_record(request, provider=provider, reason=exc.message)
        return _refused(request, UNAVAILABLE, status=503)
    except ProviderUnavailable as exc:
        logger.warning("single sign-on of tenant %s: %s", provider.tenant_id, exc)
        sign_on_failed_record(request, provider=provider, code="provider_unavailable")
        return _refused(request, UNAVAILABLE, status=503)
    login(request, user, backend=LOGIN_BACKEND)
    request.session[SESSION_TENANT_KEY] = membership.tenant_id
    return redirect(pending.next_url or "chats_ui:conversation_list")
