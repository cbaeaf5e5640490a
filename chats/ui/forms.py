"""Forms of the web UI. Choices are always limited to the current tenant (and user)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from chatplatform.core.memory.kinds import FACT, memory_kind_choices
from chatplatform.core.transfer.formats import FORMAT_LABELS
from chatplatform.models import Tenant
from chatplatform.models.conversations import Conversation, Participant
from chatplatform.tenancy.scoping import tenant_scope
from chats.ui.selectors import tenant_members


def member_label(user: Any) -> str:
    full_name = user.get_full_name()
    return f"{full_name} (@{user.username})" if full_name else f"@{user.username}"


class MemberChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return member_label(obj)


class MemberField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return member_label(obj)


class ConversationChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return str(obj)


class ConversationCreateForm(forms.Form):
    title = forms.CharField(max_length=200, required=False)
    participants = MemberChoiceField(
        queryset=get_user_model().objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Other members of your organisation to chat with (a group conversation).",
    )
    continues = ConversationChoiceField(
        queryset=Conversation.objects.none(),
        required=False,
        empty_label="— start fresh —",
        label="Continue an earlier conversation",
    )
    carry_over_summary = forms.BooleanField(
        required=False,
        initial=True,
        label="Carry over its summary",
        help_text="The earlier conversation's summary goes into the new one's context.",
    )

    def __init__(self, *args: Any, tenant: Tenant, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tenant = tenant
        participants = self.fields["participants"]
        assert isinstance(participants, forms.ModelMultipleChoiceField)
        participants.queryset = tenant_members(tenant, exclude=[user])
        with tenant_scope(tenant):
            mine = Participant.objects.filter(user=user).values("conversation_id")
            earlier = Conversation.objects.filter(pk__in=mine, archived_at__isnull=True).order_by(
                "-created_at"
            )
        continues = self.fields["continues"]
        assert isinstance(continues, forms.ModelChoiceField)
        continues.queryset = earlier

    def full_clean(self) -> None:
        # Querysets of tenant-owned models are evaluated inside the tenant's scope.
        with tenant_scope(self.tenant):
            super().full_clean()


class ConversationRenameForm(forms.Form):
    title = forms.CharField(max_length=200, required=False, strip=True)


class ParticipantAddForm(forms.Form):
    user = MemberField(
        queryset=get_user_model().objects.none(), label="Add a member", empty_label=None
    )

    def __init__(self, *args: Any, tenant: Tenant, current: list[Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["user"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = tenant_members(tenant, exclude=current)


SHAREABLE_HELP = (
    "Off: private, used only in your one-to-one chats with the assistant. On: also used in "
    "group chats, where every member reads the replies."
)


class FactForm(forms.Form):
    kind = forms.ChoiceField(
        choices=memory_kind_choices,
        initial=FACT,
        required=False,
        label="Kind",
        help_text="A fact about you, or how you want to be answered (an instruction or a "
        "preference, in your own words: a later one on the same matter replaces it).",
    )

    def clean_kind(self) -> str:
        """The kind chosen; a fact when none is."""
        return self.cleaned_data.get("kind") or FACT

    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=2000)
    key = forms.CharField(
        max_length=64,
        required=False,
        help_text="Optional, e.g. home_city: a keyed fact keeps one current value (facts only).",
    )
    shareable = forms.BooleanField(
        required=False, label="Shareable in group chats", help_text=SHAREABLE_HELP
    )


class FactEditForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=2000)
    shareable = forms.BooleanField(
        required=False, label="Shareable in group chats", help_text=SHAREABLE_HELP
    )


class FactShareForm(forms.Form):
    shareable = forms.BooleanField(required=False)


class TenantSwitchForm(forms.Form):
    tenant_id = forms.IntegerField()


class ImportForm(forms.Form):
    format = forms.ChoiceField(
        label="Exported from",
        choices=list(FORMAT_LABELS.items()),
        help_text="The conversations.json of the export, or the zip archive the service sent.",
    )
    file = forms.FileField(label="Export file")


class ExportForm(forms.Form):
    format = forms.ChoiceField(
        choices=[
            ("claude", "JSON (Claude's export shape; can be imported again)"),
            ("markdown", "Markdown (a zip of one file per conversation)"),
        ]
    )


class AccountDeleteForm(forms.Form):
    password = forms.CharField(
        label="Your password", widget=forms.PasswordInput, required=False, strip=False
    )
    confirm = forms.CharField(label="Type your username to confirm", max_length=150, required=True)
