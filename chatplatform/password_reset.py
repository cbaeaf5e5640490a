"""Password reset from the log-in page, limited so the form cannot be used to flood
mailboxes: a client asks for at most ``PASSWORD_RESET_CLIENT_LIMIT`` links an hour (then a
429 page), and an address receives at most ``PASSWORD_RESET_ADDRESS_LIMIT`` an hour (further
requests get the same answer as any other, so the page never tells whether an account
exists). Django's own views do the rest: one-time links that expire."""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.contrib.auth.forms import PasswordResetForm
from django.contrib.auth.views import PasswordResetView
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render

from chatplatform.bruteforce import client_bucket, counted_over

HOUR = 3600


class LimitedPasswordResetView(PasswordResetView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        limit = settings.PASSWORD_RESET_CLIENT_LIMIT
        if counted_over(f"password-reset:client:{client_bucket(request)}", limit, HOUR):
            context = {"limit": limit}
            return render(request, "registration/password_reset_limited.html", context, status=429)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: PasswordResetForm) -> HttpResponse:
        address = form.cleaned_data["email"].strip().lower()
        digest = hashlib.sha256(address.encode()).hexdigest()[:32]
        limit = settings.PASSWORD_RESET_ADDRESS_LIMIT
        if counted_over(f"password-reset:address:{digest}", limit, HOUR):
            return HttpResponseRedirect(self.get_success_url())
        return super().form_valid(form)
