"""The accept page of an invitation (``/invitations/<token>/``).

An anonymous visitor chooses a username (an e-mail address when the invitation has none) and
a password checked by the site's password validators; they get an account and the invited
role in the tenant, are logged in and land in their chats. A logged-in user confirms to join.
Links that cannot be used get a page that says why (an unknown link and another tenant's are
the same thing: the token names no invitation). An invitation sent to an e-mail address is
accepted only by an account with that address (a new account gets it); a link invitation
(no address) by whoever holds it. Every client may open or submit these pages
``INVITATION_CLIENT_LIMIT`` times an hour (then a 429 page), so links cannot be guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.forms import UserCreationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters

from chatplatform.bruteforce import client_bucket, counted_over
from chatplatform.django_internals import InstanceValidationHook
from chatplatform.middleware import SESSION_TENANT_KEY
from chatplatform.models import Invitation

from .services import (
    OTHER_ADDRESS,
    InvitationUnusable,
    invitation_accept,
    invitation_accept_new_user,
    invitation_for,
    invitation_usable,
)

HOUR = 3600
#: The page's status for each reason a link cannot be used (else 410: it was, once).
UNUSABLE_STATUS = {"unknown": 404, OTHER_ADDRESS: 403}
LOGIN_BACKEND = "django.contrib.auth.backends.ModelBackend"


class InvitationSignupForm(InstanceValidationHook, UserCreationForm):
    """Username, e-mail (only when the invitation has none) and the password twice."""

    email = forms.EmailField(
        label="E-mail address", help_text="For password resets.", required=True
    )

    def __init__(self, invitation: Invitation, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.invitation = invitation
        if invitation.email:
            del self.fields["email"]
            # The password validators compare the password with the address too.
            self.instance.email = invitation.email
        self.fields["username"].widget.attrs.update(autocomplete="username", autofocus=True)
        self.order_fields(["username", "email", "password1", "password2"])

    def instance_validate(self, validate: Callable[[], None]) -> None:
        if "email" in self.cleaned_data:
            self.instance.email = self.cleaned_data["email"]
        validate()


@never_cache
@sensitive_post_parameters("password1", "password2")
def invitation_accept_view(request: HttpRequest, token: str) -> HttpResponse:
    limit = settings.INVITATION_CLIENT_LIMIT
    if counted_over(f"invitation:client:{client_bucket(request)}", limit, HOUR):
        context = {"limit": limit}
        return render(request, "registration/invitation_limited.html", context, status=429)
    try:
        invitation = invitation_usable(token)
        if request.user.is_authenticated:
            return _existing_user(request, token, invitation)
        return _new_user(request, token, invitation)
    except InvitationUnusable as unusable:
        status = UNUSABLE_STATUS.get(unusable.reason, 410)
        context = {"reason": unusable.reason}
        return render(request, "registration/invitation_unusable.html", context, status=status)


def _existing_user(request: HttpRequest, token: str, invitation: Invitation) -> HttpResponse:
    if not invitation_for(invitation, request.user):
        # Someone else's invitation: the page names the address invited (the link holder
        # may have an account with it) and joins nothing; the service refuses it as well.
        context = {"reason": OTHER_ADDRESS, "invited": invitation.email}
        return render(request, "registration/invitation_unusable.html", context, status=403)
    if request.method == "POST":
        membership = invitation_accept(raw_token=token, user=request.user)
        return _to_chats(request, membership.tenant_id)
    return render(request, "registration/invitation_accept.html", {"invitation": invitation})


def _new_user(request: HttpRequest, token: str, invitation: Invitation) -> HttpResponse:
    form = InvitationSignupForm(invitation, data=request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        user, membership = invitation_accept_new_user(
            raw_token=token,
            username=form.cleaned_data["username"],
            email=form.cleaned_data.get("email", ""),
            password=form.cleaned_data["password1"],
        )
        login(request, user, backend=LOGIN_BACKEND)
        return _to_chats(request, membership.tenant_id)
    context = {"invitation": invitation, "form": form}
    return render(request, "registration/invitation_accept.html", context)


def _to_chats(request: HttpRequest, tenant_id: int) -> HttpResponse:
    """The new member works in the tenant they just joined."""
    request.session[SESSION_TENANT_KEY] = tenant_id
    return redirect("chats_ui:conversation_list")
