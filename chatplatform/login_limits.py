"""Log-in limits per client address across usernames (password spraying).

django-axes locks a username for one client address after ``LOGIN_FAILURE_LIMIT`` failures
(``AXES_*`` settings). That leaves one client free to try a password or two against every
username it can guess. This handler adds the other lock: once failed log-ins from one address
name more than ``LOGIN_ADDRESS_USERNAME_LIMIT`` distinct usernames within the lockout period
(``LOGIN_LOCKOUT_MINUTES``), that address's log-ins are refused (429, a page that says why) until
enough of its failures are older than the period; a failed try meanwhile is counted too, so a
client that keeps trying stays locked.

It locks the address, never an account: the users whose names were tried log in as usual from
anywhere else, and a user mistyping their own password counts as one username only (axes'
own lock handles that case). It counts axes' own records of failed attempts (one per username,
address and browser; a successful log-in removes the user's own), so nothing else is stored.
"""

from __future__ import annotations

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.models import AccessAttempt
from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

from chatplatform.bruteforce import ADDRESS_LOCKED
from chatplatform.client_address import client_ip


def usernames_failed_from(address: str) -> int:
    """Distinct usernames with failed log-ins from ``address`` within the lockout period."""
    since = timezone.now() - settings.AXES_COOLOFF_TIME
    return (
        AccessAttempt.objects.filter(ip_address=address, attempt_time__gte=since)
        .values("username")
        .distinct()
        .count()
    )


def address_locked(request: HttpRequest) -> bool:
    """Whether the request's client address has tried more usernames than allowed."""
    address = client_ip(request)
    if address is None:
        return False
    return usernames_failed_from(address) > int(settings.LOGIN_ADDRESS_USERNAME_LIMIT)


class AddressLimitedDatabaseHandler(AxesDatabaseHandler):
    """axes' database handler (``AXES_HANDLER``) with the per-address lock of this module."""

    def is_locked(self, request: Any, credentials: dict[str, Any] | None = None) -> bool:
        if super().is_locked(request, credentials):
            return True
        if address_locked(request):
            setattr(request, ADDRESS_LOCKED, True)
            return True
        return False

    def user_login_failed(
        self, sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any
    ) -> None:
        super().user_login_failed(sender, credentials, request, **kwargs)
        if request is None or getattr(request, "axes_locked_out", False):
            return
        # The failure just recorded may be the one that passes the limit: this answer is
        # already the lockout page.
        if getattr(request, ADDRESS_LOCKED, False) or address_locked(request):
            setattr(request, ADDRESS_LOCKED, True)
            request.axes_locked_out = True
            request.axes_credentials = credentials
