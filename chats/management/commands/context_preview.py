"""Show what the next turn of a conversation would send, section by section: the turn of a
member who takes part in it (``--user``; by default the author of its last user message), with
that member's facts."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from chatplatform.models import ContextPolicy
from chatplatform.models.conversations import Conversation
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.assembly.preview import NotATurnAuthor, preview_next_turn, turn_author


class Command(BaseCommand):
    help = "Print the context breakdown the next turn of a conversation would use."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("conversation_id", type=int)
        parser.add_argument("--policy", type=int, help="Preview with this policy instead.")
        parser.add_argument("--message", default="", help="Text of the hypothetical next message.")
        parser.add_argument(
            "--user",
            default="",
            help="Username of the member whose turn it is (their facts go in); default: the "
            "author of the conversation's last user message.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with all_tenants():
            conversation = Conversation.objects.filter(pk=options["conversation_id"]).first()
        if conversation is None:
            raise CommandError(f"conversation {options['conversation_id']} does not exist")
        policy = None
        if options["policy"]:
            with tenant_scope(conversation.tenant_id):
                policy = (
                    ContextPolicy.objects.select_related("model_profile")
                    .filter(pk=options["policy"])
                    .first()
                )
            if policy is None:
                raise CommandError(f"policy {options['policy']} is not available to this tenant")
        try:
            author = turn_author(conversation, options["user"])
        except NotATurnAuthor as exc:
            raise CommandError(str(exc)) from None
        data = preview_next_turn(
            conversation, text=options["message"], author=author, policy=policy
        )
        write = self.stdout.write
        write(
            f"conversation {conversation.pk} · strategy {data['strategy']} · counter "
            f"{data['counter']} · margin ×{data['margin_ratio']}"
            f" · retrieval by meaning {data.get('dense_retrieval', 'off')}"
        )
        write(
            f"turn of {author.username}, with their facts"
            if author is not None
            else "turn without a user (nobody has written yet): no facts"
        )
        write(
            f"prompt {data['prompt_tokens']:,} of {data['budget']:,} tokens "
            f"(window {data['context_window']:,}, "
            f"reply reserve {data['reserved_response_tokens']:,}); "
            f"full history would cost {data['hypothetical_tokens']:,}"
        )
        write("")
        write(f"{'section':<14}{'budget':>10}{'used':>10}{'items':>8}")
        for section in data["sections"]:
            write(
                f"{section['name']:<14}{section['budget']:>10,}{section['used']:>10,}"
                f"{section['items']:>8}"
            )
        reasons: dict[str, int] = {}
        for _kind, _id, _tokens, reason in data["excluded"]:
            reasons[reason] = reasons.get(reason, 0) + 1
        if reasons:
            write("")
            write(
                "left out: " + ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
            )
        for kind, _id, original, kept in data["truncated"]:
            write(f"truncated {kind}: {original:,} -> {kept:,} tokens")
