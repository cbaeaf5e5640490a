"""Set up a tenant and its first admin on an installed platform (the admin console and the chat
need a tenant: a superuser alone has none)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from chatplatform.tenant_onboarding import OnboardingRefused, tenant_onboard


def site_url() -> str:
    """Where the platform is reached, from the settings: the first named host of
    ``ALLOWED_HOSTS`` (https unless ``DEBUG``)."""
    hosts = [h.lstrip(".") for h in settings.ALLOWED_HOSTS if h not in ("*", "") and "*" not in h]
    host = hosts[0] if hosts else "localhost"
    return f"{'http' if settings.DEBUG else 'https'}://{host}"


class Command(BaseCommand):
    help = (
        "Create a tenant (with the default preset as its active policy) and make the user "
        "with ADMIN_EMAIL its admin (an existing user, or a new one named after the e-mail). "
        "Prints a one-time link where the admin sets a password, and with --api-key an API "
        "key acting as the admin, shown once, alone on the last line. A tenant that exists "
        "already is an error and nothing is changed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="The tenant's name (its slug is made from it).")
        parser.add_argument("--admin-email", required=True, help="The tenant admin's e-mail.")
        parser.add_argument(
            "--api-key", action="store_true", help="Also create an API key acting as the admin."
        )
        parser.add_argument(
            "--url",
            default=None,
            help="The site's address for the link, e.g. https://chat.example.com (default: the "
            "first host of ALLOWED_HOSTS, https unless DEBUG).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            done = tenant_onboard(
                name=options["name"],
                admin_email=options["admin_email"],
                base_url=options["url"] or site_url(),
                api_key=options["api_key"],
            )
        except OnboardingRefused as exc:
            raise CommandError(str(exc)) from None
        tenant, admin = done.tenant, done.admin
        policy = tenant.active_policy.name if tenant.active_policy else "none"
        hours = settings.PASSWORD_RESET_TIMEOUT // 3600
        account = "new user" if done.admin_created else "existing user"
        optional = " (optional: they have one)" if admin.has_usable_password() else ""
        lines = [
            f'Tenant "{tenant.name}" ({tenant.slug}) created; active policy: {policy}.',
            f"Admin: {admin.get_username()} ({account}), also of the admin site /admin/.",
            f"Set a password{optional}; the link works once, for {hours} hours:",
            done.set_password_link,
        ]
        if done.api_key is not None:
            lines += ["API key, acting as the admin (shown once, never stored):", done.api_key]
        self.stdout.write("\n".join(lines))
