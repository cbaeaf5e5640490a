"""Create the demo tenant with an admin and a member user, printing their log-ins once."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from chatplatform.models import Role, Tenant
from chatplatform.services import membership_add, random_password, tenant_create

DEMO_SLUG = "demo"


class Command(BaseCommand):
    help = "Create a demo tenant with an admin and a member (idempotent; log-ins printed once)."

    def handle(self, *args: Any, **options: Any) -> None:
        if Tenant.objects.filter(slug=DEMO_SLUG).exists():
            self.stdout.write("Demo tenant already exists (log-ins were printed when created).")
            return
        User = get_user_model()
        with transaction.atomic():
            tenant = tenant_create(name="Demo", slug=DEMO_SLUG)
            logins = []
            for username, full_name, role in (
                ("demo-admin", "Ada Admin", Role.ADMIN),
                ("demo-member", "Max Member", Role.MEMBER),
            ):
                password = random_password()
                first, last = full_name.split()
                user = User.objects.create_user(
                    username=username, password=password, first_name=first, last_name=last
                )
                membership_add(tenant=tenant, user=user, role=role)
                logins.append((username, password, role))
        self.stdout.write(self.style.SUCCESS("Demo tenant created. Log in at /:"))
        for username, password, role in logins:
            self.stdout.write(f"  {role:<7} username: {username}  password: {password}")
        self.stdout.write(
            "  (tenant admins also reach /admin/). These passwords are not shown again."
        )
