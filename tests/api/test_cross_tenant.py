"""A key reaches its own tenant only: for EVERY endpoint, tenant B's objects answer exactly
like objects that do not exist (404), and lists never show them. A guard test fails when a
route is added without a row here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from chatplatform.models import ModelProfile
from chatplatform.tenancy.scoping import tenant_scope
from chats.api import urls as api_urls
from memory.services import fact_save
from tests.api.conftest import API, error_of
from tests.api.helpers import add_message, add_summary, add_turn
from tests.factories import png_image

pytestmark = pytest.mark.django_db

MISSING = 10**9


@dataclass
class World:
    conversation: int
    message: int
    fact: int
    profile: int
    image: int  # a message with an image
    export: int = MISSING  # an export of the conversations, done, its file there


@pytest.fixture
def world_b(tenant_b, member_b, conversation_b) -> World:
    """Tenant B's objects of every kind."""
    record = add_turn(conversation_b, member_b)
    message = add_message(conversation_b, member_b, "B only", image=png_image())
    add_summary(conversation_b, message, message)
    fact = fact_save(tenant_b, member_b, "B's fact")
    with tenant_scope(tenant_b):
        profile = ModelProfile.objects.create(
            tenant=tenant_b,
            name="B model",
            provider="offline",
            model="b",
            context_window=4096,
            max_output_tokens=256,
        )
    assert record.user_message_id
    from datetime import timedelta

    from django.utils import timezone

    from chatplatform.models import Transfer
    from chats.transfer.files import file_save

    with tenant_scope(tenant_b):
        export = Transfer.objects.create(
            tenant=tenant_b,
            user=member_b,
            kind="export",
            format="claude",
            status="done",
            file=file_save(tenant_b.pk, "exports", b"[]", "json"),
            expires_at=timezone.now() + timedelta(hours=1),
        )
    return World(
        conversation_b.pk, record.user_message_id, fact.pk, profile.pk, message.pk, export.pk
    )


def missing_world() -> World:
    return World(MISSING, MISSING, MISSING, MISSING, MISSING)


# (route name, method, path template, body); {c} conversation, {m} message, {f} fact, {p} profile,
# {i} a message with an image, {x} an export
OBJECT_ENDPOINTS: list[tuple[str, str, str, Any]] = [
    ("conversation", "get", "conversations/{c}/", None),
    ("conversation", "patch", "conversations/{c}/", {"title": "taken"}),
    ("conversation", "delete", "conversations/{c}/", None),
    ("archive", "post", "conversations/{c}/archive/", None),
    ("leave", "post", "conversations/{c}/leave/", None),
    ("messages", "get", "conversations/{c}/messages/", None),
    ("messages", "post", "conversations/{c}/messages/", {"content": "hi"}),
    ("message", "get", "conversations/{c}/messages/{m}/", None),
    ("message-image", "get", "conversations/{c}/messages/{i}/image/", None),
    ("turn-record", "get", "conversations/{c}/messages/{m}/context/", None),
    ("message-regenerate", "post", "conversations/{c}/messages/{m}/regenerate/", None),
    ("message-edit", "post", "conversations/{c}/messages/{m}/edit/", {"content": "taken"}),
    ("message-versions", "get", "conversations/{c}/messages/{m}/versions/", None),
    ("context-preview", "get", "conversations/{c}/context/", None),
    ("export", "get", "exports/{x}/", None),
    ("export-download", "get", "exports/{x}/download/", None),
    ("summaries", "get", "conversations/{c}/summaries/", None),
    ("summaries-refresh", "post", "conversations/{c}/summaries/refresh/", None),
    ("fact", "get", "facts/{f}/", None),
    ("fact", "patch", "facts/{f}/", {"text": "taken"}),
    ("fact", "delete", "facts/{f}/", None),
    ("fact-by-key", "put", "facts/by-key/color/?user=member-b", {"text": "red"}),
    ("model-profile", "get", "model-profiles/{p}/", None),
]
LIST_ENDPOINTS = [
    "me",
    "conversations",
    "facts",
    "usage",
    "policy",
    "model-profiles",
    "exports",
]
NOT_TENANT_DATA = ["root", "schema", "docs", "not-found"]


def call(client, method: str, template: str, body: Any, world: World):
    path = template.format(
        c=world.conversation,
        m=world.message,
        f=world.fact,
        p=world.profile,
        i=world.image,
        x=world.export,
    )
    function = getattr(client, method)
    if body is None:
        return function(f"{API}/{path}")
    return function(f"{API}/{path}", body, format="json")


@pytest.mark.parametrize(("name", "method", "template", "body"), OBJECT_ENDPOINTS)
def test_another_tenants_object_answers_like_a_missing_one(
    admin_client_a, world_b, name, method, template, body
):
    # An admin key of tenant A: the strongest credential there is, short of tenant B's.
    theirs = call(admin_client_a, method, template, body, world_b)
    missing = call(admin_client_a, method, template, body, missing_world())
    error_theirs = error_of(theirs, 404, "not_found")
    error_missing = error_of(missing, 404, "not_found")
    assert error_theirs == error_missing


def test_nothing_of_tenant_b_changed(admin_client_a, world_b, tenant_b, member_b):
    for _name, method, template, body in OBJECT_ENDPOINTS:
        call(admin_client_a, method, template, body, world_b)
    from chatplatform.models.conversations import Conversation, Message
    from memory.models import UserFact

    with tenant_scope(tenant_b):
        conversation = Conversation.objects.get(pk=world_b.conversation)
        assert conversation.title == "Beta plans" and conversation.archived_at is None
        assert Message.objects.filter(conversation=conversation).count() == 2
        assert list(conversation.participants.all()) == [member_b]  # nobody left it
        assert UserFact.objects.get(pk=world_b.fact).text == "B's fact"
        assert not UserFact.objects.filter(key="color").exists()


def test_lists_never_show_another_tenants_data(admin_client_a, world_b, tenant_a):
    me = admin_client_a.get(f"{API}/me/").json()
    assert me["tenant"]["id"] == tenant_a.pk
    conversations = admin_client_a.get(f"{API}/conversations/").json()["results"]
    assert world_b.conversation not in [c["id"] for c in conversations]
    facts = admin_client_a.get(f"{API}/facts/").json()["results"]
    assert world_b.fact not in [f["id"] for f in facts]
    usage = admin_client_a.get(f"{API}/usage/").json()
    assert usage["totals"]["turns"] == 0
    policy = admin_client_a.get(f"{API}/policy/").json()
    assert policy["id"] == tenant_a.active_policy_id
    profiles = admin_client_a.get(f"{API}/model-profiles/").json()["results"]
    assert world_b.profile not in [p["id"] for p in profiles]


def test_every_route_has_a_cross_tenant_test():
    covered = {name for name, *_ in OBJECT_ENDPOINTS} | set(LIST_ENDPOINTS)
    routes = {pattern.name for pattern in api_urls.urlpatterns}
    assert routes - set(NOT_TENANT_DATA) == covered
