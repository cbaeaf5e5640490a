""" "Preview on a conversation": the breakdown a policy would produce for the next turn of a
conversation now, next to the conversation's active policy's. Conversations are limited to
the tenants the admin administers (and to the policy's own tenant for a tenant policy); the
turn is that of a member who takes part in the chosen conversation (by default the author of
its last user message), with that member's facts, as a real turn would have them."""

from __future__ import annotations

import logging
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.models.conversations import Conversation
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly.cost_estimate import expected_turn_cost
from chats.assembly.preview import preview_next_turn, turn_author, turn_authors
from chats.ui.meter import meter_from_breakdown

logger = logging.getLogger(__name__)

CONVERSATIONS_OFFERED = 200


def preview_conversations(policy: ContextPolicy, tenant_ids: list[int] | None) -> QuerySet:
    """Conversations the policy may be previewed on. ``tenant_ids`` None: every tenant
    (superusers)."""
    queryset = Conversation.objects.all()
    if tenant_ids is not None:
        queryset = queryset.filter(tenant_id__in=tenant_ids)
    if policy.tenant_id is not None:
        queryset = queryset.filter(tenant_id=policy.tenant_id)
    return queryset.select_related("tenant").order_by("-created_at", "-pk")[:CONVERSATIONS_OFFERED]


class ConversationField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj} · {obj.tenant.name} · {obj.message_count} messages"


class AuthorField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        name = obj.get_full_name()
        return f"{obj.username} ({name})" if name else obj.username


class PolicyPreviewForm(forms.Form):
    conversation = ConversationField(queryset=Conversation.objects.none())
    user = AuthorField(
        queryset=get_user_model().objects.none(),
        required=False,
        label="Whose turn",
        empty_label="The author of the last user message",
        help_text="A member who takes part in the conversation: the preview uses their facts "
        "and their name, as their next turn would.",
    )
    text = forms.CharField(
        required=False,
        max_length=4000,
        label="Next message (optional)",
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="What the user would write next; it steers retrieval. Nothing is stored.",
    )

    def __init__(self, *args: Any, conversations: QuerySet, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["conversation"]
        assert isinstance(field, forms.ModelChoiceField)
        # A list of allowed ids (the offered queryset is sliced, so it cannot be filtered).
        allowed = [c.pk for c in conversations]
        field.queryset = Conversation.objects.filter(pk__in=allowed).select_related("tenant")
        # Everyone who may be chosen on some offered conversation; clean() checks the pair.
        self.turn_authors = turn_authors(conversations) if allowed else set()
        user_field = self.fields["user"]
        assert isinstance(user_field, forms.ModelChoiceField)
        user_field.queryset = (
            get_user_model()
            .objects.filter(pk__in={user_id for _, user_id in self.turn_authors})
            .order_by("username")
        )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        conversation, user = cleaned.get("conversation"), cleaned.get("user")
        if conversation is not None and user is not None:
            if (conversation.pk, user.pk) not in self.turn_authors:
                self.add_error("user", f"{user.username} does not take part in this conversation.")
        elif conversation is not None:
            cleaned["user"] = turn_author(conversation)
        return cleaned


def compare_policies(
    conversation: Conversation, policy: ContextPolicy, text: str = "", author: Any = None
) -> dict[str, Any]:
    """Meters of ``author``'s next turn under ``policy`` and under the conversation's active
    policy. An assembly that fails reports its error instead of a meter."""
    with tenant_scope(conversation.tenant_id):
        return {
            "this": _meter(conversation, text, author, policy),
            "active": _meter(conversation, text, author, None),
            "author": author,
        }


def _with_cost(meter: dict[str, Any], conversation: Conversation, policy: ContextPolicy) -> None:
    """Add the policy's expected prompt cost per turn on ``conversation`` to ``meter``."""
    try:
        meter["cost"] = expected_turn_cost(conversation, policy).as_dict()
    except Exception as exc:  # show the admin why, instead of a server error
        logger.warning("cost estimate failed for conversation %s: %s", conversation.pk, exc)
        meter["cost_error"] = str(exc) or exc.__class__.__name__


def _meter(
    conversation: Conversation, text: str, author: Any, policy: ContextPolicy | None
) -> dict[str, Any]:
    try:
        data = preview_next_turn(conversation, text=text, author=author, policy=policy)
    except Exception as exc:  # show the admin why, instead of a server error
        logger.warning("policy preview failed for conversation %s: %s", conversation.pk, exc)
        return {"error": str(exc) or exc.__class__.__name__}
    meter = meter_from_breakdown(data)
    meter["context_window"] = data.get("context_window")
    meter["policy_id"] = (data.get("policy") or {}).get("id")
    _with_cost(meter, conversation, policy or policy_for(conversation))
    return meter


def model_windows(profiles: QuerySet | list[ModelProfile]) -> dict[str, dict[str, Any]]:
    """Model profile id -> window facts, for the live bar of the policy form."""
    return {
        str(p.pk): {
            "name": p.name,
            "context_window": p.context_window,
            "max_output_tokens": p.max_output_tokens,
        }
        for p in profiles
    }
