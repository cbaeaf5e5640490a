"""Import a user's conversations from ChatGPT's or Claude's export (``conversations.json`` or
the zip the service sent) into their account in a tenant. Importing the same file again adds
only what is not there yet; a file with any error stores nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q

from chatplatform.core.transfer.formats import READERS
from chatplatform.core.transfer.records import TransferFormatError
from chatplatform.models import Membership, Tenant
from chatplatform.tenancy.scoping import tenant_scope
from chats.services.messages import MessageRejected
from chats.transfer.conversation_import import conversations_import_file


class Command(BaseCommand):
    help = (
        "Import conversations from a ChatGPT or Claude export into a member's account. "
        "Idempotent: a second import of the same file adds nothing."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("file", help="The export's conversations.json, or its zip archive.")
        parser.add_argument("--format", required=True, choices=sorted(READERS))
        parser.add_argument("--tenant", required=True, help="The tenant's slug or name.")
        parser.add_argument("--user", required=True, help="The member's username or e-mail.")
        parser.add_argument(
            "--json",
            action="store_true",
            help='Print only {"conversations": N, "messages": N, "skipped": N}: what was '
            "added, and the messages found there already.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = _tenant(options["tenant"])
        user = _member(tenant, options["user"])
        limit = int(settings.TRANSFER_IMPORT_MAX_BYTES)
        path = Path(options["file"])
        try:
            size = path.stat().st_size
            if size > limit:
                raise CommandError(f"{path} is larger than {limit:,} bytes")
            raw = path.read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            result = conversations_import_file(
                tenant, user, options["format"], raw, max_bytes=limit
            )
        except (TransferFormatError, MessageRejected) as exc:
            raise CommandError(f"{path}: {exc} Nothing was imported.") from None
        if options["json"]:
            self.stdout.write(json.dumps(result.as_dict()))
            return
        self.stdout.write(
            f"Imported {result.conversations} new conversations and {result.messages} "
            f"messages for {user.get_username()} in {tenant.name}; {result.skipped} messages "
            "were there already."
        )


def _tenant(name: str) -> Tenant:
    found = list(Tenant.objects.filter(Q(slug=name) | Q(name=name))[:2])
    if not found:
        raise CommandError(f"no tenant has the slug or name {name!r}")
    if len(found) > 1:
        raise CommandError(f"several tenants are named {name!r}: give the slug")
    return found[0]


def _member(tenant: Tenant, name: str) -> Any:
    users = get_user_model().objects
    found = list(users.filter(username=name)[:1]) if name else []
    if not found and "@" in name:
        found = list(users.filter(email__iexact=name)[:2])
    if not found:
        raise CommandError(f"no user has the username or e-mail {name!r}")
    if len(found) > 1:
        raise CommandError(f"several users have the e-mail {name!r}: give the username")
    user = found[0]
    with tenant_scope(tenant):
        if not Membership.objects.filter(user=user).exists():
            raise CommandError(f"{user.get_username()} is not a member of {tenant.name}")
    return user
