"""The demo tenant a fresh clone starts with: an admin and a member, a small policy and a long
conversation, so that the first reply already shows what the platform does. The history is
longer than the policy's budget (the window trims it), older turns hold details a question
can recall (retrieval), a rolling summary covers the oldest part, and the model is priced like
Claude Sonnet 4.5 so the meter's comparison with sending the whole history is in dollars.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from chatplatform.core.llm.providers import OFFLINE
from chatplatform.models import ContextPolicy, MembershipRole, ModelProfile, Tenant
from chatplatform.models.conversations import Conversation, Message, MessageRole
from chatplatform.policies import DEFAULT_PRESET
from chatplatform.services import (
    membership_add,
    policy_copy,
    random_password,
    tenant_create,
    tenant_set_active_policy,
)
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.services import conversation_create, message_create
from summaries.services import summary_refresh

DEMO_SLUG = "demo"
USERS = (
    ("demo-member", "Max Member", MembershipRole.MEMBER),
    ("demo-admin", "Ada Admin", MembershipRole.ADMIN),
)
CONVERSATION_TITLE = "Planning a trip to Lisbon (demo)"
POLICY_NAME = "Demo: small budget"
SUGGESTED_QUESTION = "What is Biscuit allergic to, and where are we staying?"

#: What the history is made of: facts worth recalling early on, then days of planning.
_OPENING = [
    (
        "Our dog Biscuit is allergic to chicken: any dog food or treats we buy must be "
        "chicken-free. We're planning a week in Lisbon in May, and Biscuit comes with us.",
        "Noted: a week in Lisbon in May, travelling with Biscuit, and no chicken in anything "
        "Biscuit eats. I'll keep that in mind for restaurants, pet shops and the flat.",
    ),
    (
        "We booked a flat in Alfama, Rua de São Miguel 14, third floor, no lift. The host is "
        "called Inês and check-in is after 15:00.",
        "Alfama it is: Rua de São Miguel 14, third floor without a lift, host Inês, check-in "
        "from 15:00. Pack light enough to carry up three flights with a dog.",
    ),
]
_DAYS = [
    ("Belém", "the tower, the monastery and pastéis de nata", "tram 15 from Praça da Figueira"),
    ("Sintra", "Pena Palace and the Moorish castle", "the train from Rossio, about 40 minutes"),
    ("Cascais", "the beach walk to Boca do Inferno", "the train from Cais do Sodré"),
    ("Baixa", "Praça do Comércio and the Santa Justa lift", "a walk down from Alfama"),
    ("LX Factory", "the bookshop and the Sunday market", "tram 15 or a short taxi ride"),
    ("Parque das Nações", "the Oceanarium and the cable car", "the red metro line"),
    ("Bairro Alto", "the viewpoints and an evening of fado", "the Glória funicular"),
    ("Costa da Caparica", "long sandy beaches", "a bus across the 25 de Abril bridge"),
    ("Graça", "the miradouro and the little church square", "tram 28, early, before the queues"),
    ("Estrela", "the basilica and the garden with its pond", "tram 28 in the other direction"),
    ("Príncipe Real", "the garden, the cedar and the antique shops", "a walk up from Bairro Alto"),
    ("Arrábida", "the hills and the coves", "a car or a tour from Setúbal"),
]
_ASPECTS = [
    (
        "What should we plan for {place}? We'd like to see {what}.",
        "For {place}, give it most of a day: {what}. Getting there: {how}. Dogs are allowed "
        "outdoors almost everywhere, but take water and check each museum's rules first.",
    ),
    (
        "Is {place} good with a dog, and how crowded does it get in May?",
        "{place} is manageable with a dog if you go early; May is busy but not like summer. "
        "Keep Biscuit on a short lead on the trams and carry a small folding bowl.",
    ),
    (
        "How long should we stay in {place}, and what if it rains?",
        "Half a day in {place} is enough for the highlights; if it rains, most of {what} "
        "still works with a raincoat, and cafés there welcome dogs under the table.",
    ),
    (
        "What does a day in {place} cost for two, roughly?",
        "Budget about 60 to 90 euros for two in {place}: transport ({how}), a lunch, a coffee "
        "stop and one ticket. Museums are cheaper with the Lisboa card.",
    ),
    (
        "Any food tips near {place}? Remember the allergy.",
        "Near {place} there are good grilled-fish places; for Biscuit, pack your own "
        "chicken-free treats, since many local dog snacks are poultry-based.",
    ),
]


@dataclass(frozen=True)
class Demo:
    tenant: Tenant
    conversation: Conversation
    policy: ContextPolicy
    passwords: dict[str, str]  # only when just created or reset


def demo_tenant() -> Tenant | None:
    with all_tenants():
        return Tenant.objects.filter(slug=DEMO_SLUG).first()


def demo_create() -> Demo:
    """Create the demo tenant, its users (random passwords, returned), its policy and its
    conversation with a rolling summary. Call only when :func:`demo_tenant` is None."""
    with transaction.atomic():
        tenant = tenant_create(name="Demo", slug=DEMO_SLUG)
        users, passwords = {}, {}
        for username, full_name, role in USERS:
            first, last = full_name.split()
            users[username] = get_user_model().objects.create_user(
                username=username, first_name=first, last_name=last
            )
            membership_add(tenant=tenant, user=users[username], role=role)
        passwords = demo_passwords_reset()
        policy = _small_policy(tenant)
        conversation = _long_conversation(tenant, users["demo-member"])
    while summary_refresh(tenant.pk, conversation.pk).more:
        pass
    return Demo(tenant, conversation, policy, passwords)


def demo_passwords_reset() -> dict[str, str]:
    """New random passwords for the demo users (they are never stored in clear)."""
    passwords = {}
    for username, _, _ in USERS:
        user = get_user_model().objects.get(username=username)
        passwords[username] = random_password()
        user.set_password(passwords[username])
        user.save(update_fields=["password"])
    return passwords


def _small_policy(tenant: Tenant) -> ContextPolicy:
    """The default preset, copied with a budget small enough for the demo history to overflow,
    on the offline model priced like Claude Sonnet 4.5."""
    shared = ModelProfile._base_manager.filter(tenant=None)
    offline = shared.get(provider=OFFLINE.name)
    priced = shared.filter(name="Claude Sonnet 4.5").first()
    profile = ModelProfile(
        tenant=tenant,
        name="Offline (demo, priced like Claude Sonnet 4.5)",
        **{
            field.attname: getattr(offline, field.attname)
            for field in ModelProfile._meta.concrete_fields
            if field.name not in {"id", "tenant", "name", "calibration_updated_at"}
        },
    )
    for price in ("input", "output", "cache_read", "cache_write"):
        field = f"price_{price}_per_mtok"
        setattr(profile, field, getattr(priced or offline, field))
    profile.save()
    preset = ContextPolicy._base_manager.get(tenant=None, name=DEFAULT_PRESET)
    policy = policy_copy(policy=preset, tenant=tenant)
    policy.name, policy.model_profile = POLICY_NAME, profile
    policy.description = "A small budget, so that the demo conversation is trimmed and recalled."
    policy.max_context_tokens = 4_000
    policy.reserved_response_tokens = 1_000
    policy.system_budget, policy.facts_budget = 500, 300
    policy.instructions_budget = 300
    policy.summaries_budget, policy.retrieval_budget = 500, 600
    policy.summary_interval = 10
    policy.raw_history_limit = 30
    with tenant_scope(tenant.pk):
        policy.full_clean()
        policy.save()
    tenant_set_active_policy(tenant=tenant, policy=policy)
    return policy


def _long_conversation(tenant: Tenant, member: Any) -> Conversation:
    conversation = conversation_create(tenant=tenant, created_by=member, title=CONVERSATION_TITLE)
    exchanges = list(_OPENING)
    for place, what, how in _DAYS:
        for ask, answer in _ASPECTS:
            exchanges.append(
                (ask.format(place=place, what=what), answer.format(place=place, what=what, how=how))
            )
    start = timezone.now() - timedelta(days=12)
    step = timedelta(days=11) / len(exchanges)
    for number, (question, answer) in enumerate(exchanges):
        # Each answer answers its question: the reply queue sees nothing waiting for a reply.
        asked, _ = message_create(
            conversation=conversation, role=MessageRole.USER, content=question, author=member
        )
        answered, _ = message_create(
            conversation=conversation, role=MessageRole.ASSISTANT, content=answer, answers=asked
        )
        with tenant_scope(tenant.pk):
            Message.objects.filter(pk__in=[asked.pk, answered.pk]).update(
                created_at=start + number * step
            )
    return conversation
