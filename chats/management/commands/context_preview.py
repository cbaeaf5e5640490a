"""Show what the next turn of a conversation would send, section by section."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from chatplatform.models import ContextPolicy
from chatplatform.models.conversations import Conversation
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.assembly.preview import preview_next_turn


class Command(BaseCommand):
    help = "Print the context breakdown the next turn of a conversation would use."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("conversation_id", type=int)
        parser.add_argument("--policy", type=int, help="Preview with this policy instead.")
        parser.add_argument("--message", default="", help="Text of the hypothetical next message.")

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
        data = preview_next_turn(conversation, text=options["message"], policy=policy)
        write = self.stdout.write
        write(
            f"conversation {conversation.pk} · strategy {data['strategy']} · counter "
            f"{data['counter']} · margin ×{data['margin_ratio']}"
            f" · retrieval by meaning {data.get('dense_retrieval', 'off')}"
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
