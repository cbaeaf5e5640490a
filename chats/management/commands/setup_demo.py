"""Create the demo tenant (once) and print the box that `make run` ends with: where the
platform listens, the demo log-ins, and how to get new passwords."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from chats.demo import (
    CONVERSATION_TITLE,
    SUGGESTED_QUESTION,
    USERS,
    demo_create,
    demo_passwords_reset,
    demo_tenant,
)


class Command(BaseCommand):
    help = (
        "Create the demo tenant with an admin, a member, a small policy and a long "
        "conversation (once), then print the log-ins. Passwords are shown when created or "
        "reset (--reset-passwords), never stored in clear."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="Where it listens.")
        parser.add_argument(
            "--reset-passwords", action="store_true", help="Give the demo users new passwords."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        passwords: dict[str, str] = {}
        if demo_tenant() is None:
            passwords = demo_create().passwords
        elif options["reset_passwords"]:
            passwords = demo_passwords_reset()
        self.stdout.write(self.style.SUCCESS(box(options["url"], passwords)))


def box(url: str, passwords: dict[str, str]) -> str:
    lines = [f"chatplatform is running on {url}", ""]
    for username, _, role in USERS:
        shown = passwords.get(username, "(shown when created)")
        extra = "  also /admin/" if role == "admin" else ""
        lines.append(f"{role:<7} {username:<12} password: {shown}{extra}")
    lines += [
        "",
        "New passwords: make demo-passwords",
        f'Try: open "{CONVERSATION_TITLE}"',
        f'     and ask "{SUGGESTED_QUESTION}"',
    ]
    width = max(map(len, lines))
    rule = "─" * (width + 2)
    body = [f"│ {line:<{width}} │" for line in lines]
    return "\n".join([f"┌{rule}┐", *body, f"└{rule}┘"])
