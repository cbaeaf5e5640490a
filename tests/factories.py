"""The one set of builders for test data: tenants, users, memberships, model profiles, policies,
conversations, messages and summaries. Tenant-owned objects are created inside the tenant's
scope, through the platform's services where one exists, so a test builds what production
would. A test states only the values its behaviour depends on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import factory
from django.contrib.auth import get_user_model

from chatplatform.models import ContextPolicy, Membership, MembershipRole, ModelProfile, Tenant
from chatplatform.models.conversations import Conversation, Message
from chatplatform.services import membership_add, tenant_create
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.images import ImageInfo, decode_base64_image
from chats.services import conversation_create, message_create
from summaries.models import Summary


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    first_name = factory.Faker("first_name")
    last_name = factory.Faker("last_name")
    password = factory.PostGenerationMethodCall("set_password", "pw")

    @factory.post_generation
    def _save(obj: Any, create: bool, extracted: Any, **kwargs: Any) -> None:
        if create:
            obj.save()


_tenant_counter = iter(range(1, 10**9))


def make_tenant(name: str | None = None, policy_name: str = "Hybrid") -> Tenant:
    n = next(_tenant_counter)
    return tenant_create(name=name or f"Tenant {n}", slug=f"tenant-{n}", policy_name=policy_name)


def make_member(tenant: Tenant, role: str = MembershipRole.MEMBER, **user_kwargs: Any) -> Any:
    user = UserFactory(**user_kwargs)
    membership_add(tenant=tenant, user=user, role=role)
    return user


def make_admin(tenant: Tenant, **user_kwargs: Any) -> Any:
    return make_member(tenant, role=MembershipRole.ADMIN, **user_kwargs)


def membership_of(tenant: Tenant, user: Any) -> Membership:
    with tenant_scope(tenant):
        return Membership.objects.get(tenant=tenant, user=user)


OFFLINE_PROFILE = "Offline (built in)"


def offline_profile() -> ModelProfile:
    """The built-in offline model every tenant can pick (a preset of the data migration)."""
    with all_tenants():
        return ModelProfile.objects.get(name=OFFLINE_PROFILE)


#: A valid policy on the offline model with room in every section: the policy's field defaults
#: (the default preset's values); the admin form below and the policy builders start from them.
_DEFAULTED = (
    "strategy",
    "max_context_tokens",
    "reserved_response_tokens",
    "system_budget",
    "instructions_budget",
    "facts_budget",
    "summaries_budget",
    "retrieval_budget",
)
POLICY_DEFAULTS: dict[str, Any] = {
    field.name: field.get_default()
    for field in ContextPolicy._meta.concrete_fields
    if field.name in _DEFAULTED
}

_policy_counter = iter(range(1, 10**9))


def build_policy(tenant: Tenant, **values: Any) -> ContextPolicy:
    """An unsaved tenant policy (for validation tests); ``values`` override the defaults. A
    test that sizes the prompt (``max_context_tokens``) without naming the standing
    instructions' budget leaves that section out: its sizes were chosen without it."""
    fields: dict[str, Any] = {
        "tenant": tenant,
        "name": f"policy {next(_policy_counter)}",
        **POLICY_DEFAULTS,
        **values,
    }
    if "max_context_tokens" in values and "instructions_budget" not in values:
        fields["instructions_budget"] = 0
    if fields.get("model_profile") is None:
        fields["model_profile"] = offline_profile()
    return ContextPolicy(**fields)


def make_policy(tenant: Tenant, *, activate: bool = False, **values: Any) -> ContextPolicy:
    """A stored tenant policy; with ``activate`` it becomes the tenant's active policy."""
    policy = build_policy(tenant, **values)
    with tenant_scope(tenant):
        policy.save()
    if activate:
        tenant.active_policy = policy
        tenant.save(update_fields=["active_policy"])
    return policy


def policy_form_data(tenant: Tenant | None, **changes: Any) -> dict[str, Any]:
    """The admin's policy form, filled in with a valid policy (``changes`` override fields)."""
    data: dict[str, Any] = {
        "tenant": tenant.pk if tenant is not None else "",
        "name": "Policy",
        "description": "",
        "model_profile": offline_profile().pk,
        **POLICY_DEFAULTS,
        "safety_margin_percent": 2,
        "oversized_message": "cut",
        "budget_unit": "tokens",
        "min_recent_messages": 20,
        "recent_message_cap": 100,
        "raw_history_limit": 20,
        "summary_interval": 20,
        "summary_trigger_percent": 80,
        "summary_session_gap_minutes": 180,
        "max_summaries_in_context": 3,
        "summary_max_tokens": 512,
        "periodic_summaries_enabled": "on",
        "recent_summary_days": 7,
        "recent_summary_interval_days": 3,
        "recent_summary_tokens": 1024,
        "long_summary_days": 30,
        "long_summary_interval_days": 14,
        "long_summary_tokens": 4096,
        "instructions_enabled": "on",
        "max_instructions_per_user": 30,
        "facts_enabled": "on",
        "max_facts_per_user": 50,
        "max_fact_chars": 500,
        "retrieval_max_items": 8,
        "retrieval_neighbors": 1,
        "reply_excerpt_tokens": 100,
        "turn_retrieval_percent": 10,
        "history_trim_percent": 60,
        "cache_ttl": "5m",
        "system_prompt_template": "You are {botname}.",
        "bot_name": "Bot",
        "tools_enabled": "on",
        "context_editing": "off",
        "max_message_chars": 65536,
        "user_messages_per_minute": 30,
    }
    data.update(changes)
    return data


def make_conversation(
    tenant: Tenant, user: Any, title: str = "Chat", **kwargs: Any
) -> Conversation:
    """A conversation started by ``user`` (the service adds the participants)."""
    return conversation_create(tenant=tenant, created_by=user, title=title, **kwargs)


def make_message(
    conversation: Conversation, content: str, role: str = "user", author: Any = None, **kwargs: Any
) -> Message:
    """A stored message, counted and sequenced by the service like a sent one."""
    message, _ = message_create(
        conversation=conversation, role=role, content=content, author=author, **kwargs
    )
    return message


#: A 1x1 PNG as base64: the smallest image a message accepts.
PNG_1x1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)


def png_image() -> tuple[bytes, ImageInfo]:
    """:data:`PNG_1x1` checked, as ``message_create(image=...)`` takes it."""
    return decode_base64_image(PNG_1x1, "image/png")


def summary(
    conversation: Any, first: int, last: int, text: str, kind: str = "rolling", **extra: Any
) -> Any:
    """A stored summary of ``conversation``'s messages ``first..last`` (counted by word)."""
    with tenant_scope(conversation.tenant_id):
        return Summary.objects.create(
            tenant_id=conversation.tenant_id,
            conversation=conversation,
            kind=kind,
            first_seq=first,
            last_seq=last,
            text=text,
            token_count=len(text.split()),
            token_counter="o200k_base",
            model="offline",
            prompt_version="1",
            period_end=datetime(2024, 3, 1, 12, 0, tzinfo=UTC),
            **extra,
        )
