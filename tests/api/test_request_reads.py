"""The reads every API request makes (the key, the conversation it names, the turn's outcome):
on PostgreSQL each is one statement without the ORM's query building, elsewhere the ORM's
queries. The same cases hold on both, and on PostgreSQL the instances equal the ORM's own
field for field, their related rows included."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.models import Model
from django.utils import timezone

from chatplatform.apikeys import authenticate_api_key
from chatplatform.models import ApiKey, Membership
from chatplatform.models.conversations import Conversation, MessageRole, TurnRecord
from chatplatform.services import api_key_create, api_key_revoke, membership_remove
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.api.selectors import reply_to, turn_outcome, turn_record_for
from chats.selectors import conversation_for_member
from chats.services.messages import message_create
from tests.api.helpers import add_message, add_turn
from tests.factories import UserFactory, make_conversation, make_member, offline_profile

pytestmark = pytest.mark.django_db


def _values(instance: Model) -> dict[str, Any]:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


def _same(found: Model | None, expected: Model | None) -> None:
    assert found is not None and expected is not None
    assert type(found) is type(expected)
    assert _values(found) == _values(expected)
    assert {k: type(v) for k, v in _values(found).items()} == {
        k: type(v) for k, v in _values(expected).items()
    }


def test_a_key_gives_its_tenant_and_user_as_the_orm_reads_them(tenant_a, member_a):
    _, raw = api_key_create(tenant=tenant_a, name="app", user=member_a)
    assert authenticate_api_key(raw) is not None  # its first use is written, once a minute
    principal = authenticate_api_key(raw)
    assert principal is not None and principal.user == member_a and principal.tenant == tenant_a
    with all_tenants():
        stored = ApiKey.objects.select_related("tenant", "user").get(pk=principal.key.pk)
    _same(principal.key, stored)
    _same(principal.key.tenant, stored.tenant)
    _same(principal.user, stored.user)


def test_a_key_without_a_user_acts_as_the_tenants_service_user(tenant_a):
    _, raw = api_key_create(tenant=tenant_a, name="service")
    principal = authenticate_api_key(raw)
    assert principal is not None
    assert principal.user == tenant_a.service_user and principal.key.user is None
    assert principal.key.tenant.service_user == tenant_a.service_user


def test_a_key_is_refused_once_revoked_or_its_user_or_tenant_is_not_active(tenant_a, member_a):
    key, raw = api_key_create(tenant=tenant_a, name="app", user=member_a)
    assert authenticate_api_key(raw) is not None
    tenant_a.is_active = False
    tenant_a.save()
    assert authenticate_api_key(raw) is None
    tenant_a.is_active = True
    tenant_a.save()
    member_a.is_active = False
    member_a.save()
    assert authenticate_api_key(raw) is None
    member_a.is_active = True
    member_a.save()
    assert authenticate_api_key(raw) is not None
    api_key_revoke(key=key)
    assert authenticate_api_key(raw) is None


def test_a_key_of_a_user_no_longer_a_member_is_refused(tenant_a, member_a):
    _, raw = api_key_create(tenant=tenant_a, name="app", user=member_a)
    with tenant_scope(tenant_a):
        membership = Membership.objects.get(user=member_a)
    membership_remove(membership=membership)
    assert authenticate_api_key(raw) is None


def test_a_named_conversation_is_the_members_only(tenant_a, tenant_b, member_a, member_b):
    conversation = make_conversation(tenant_a, member_a, title="Plans")
    found = conversation_for_member(member_a, conversation.pk, tenant_id=tenant_a.pk)
    assert found is not None
    with all_tenants():
        _same(found, Conversation.objects.get(pk=conversation.pk))
    assert conversation_for_member(member_a, str(conversation.pk)) == conversation
    # Another tenant's member, a member who is no participant, another tenant named.
    assert conversation_for_member(member_b, conversation.pk) is None
    other = make_member(tenant_a, username="not-in-it")
    assert conversation_for_member(other, conversation.pk) is None
    assert conversation_for_member(member_a, conversation.pk, tenant_id=tenant_b.pk) is None
    assert conversation_for_member(member_a, conversation.pk + 1000) is None
    assert conversation_for_member(UserFactory(), conversation.pk) is None


def test_a_conversation_is_nobodys_once_its_tenant_is_not_active(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a, title="Plans")
    tenant_a.is_active = False
    tenant_a.save()
    assert conversation_for_member(member_a, conversation.pk) is None


def test_a_conversation_is_nobodys_once_its_member_leaves_the_tenant(tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a, title="Plans")
    with tenant_scope(tenant_a):
        membership = Membership.objects.get(user=member_a)
    membership_remove(membership=membership)
    assert conversation_for_member(member_a, conversation.pk) is None


def _answered_turn(conversation, author, *, superseded: bool = False) -> TurnRecord:
    """A user message with its turn's record and, unless ``superseded`` is asked for, the
    reply; with it, an earlier record of the turn superseded first."""
    record = add_turn(conversation, author, profile=offline_profile())
    question = record.user_message
    assert question is not None
    with tenant_scope(conversation.tenant_id):
        reply = message_create(
            conversation=conversation,
            role=MessageRole.ASSISTANT,
            content="Thursday.",
            answers=question,
        )[0]
        TurnRecord.objects.filter(pk=record.pk).update(assistant_message=reply)
        if superseded:
            TurnRecord.objects.filter(pk=record.pk).update(superseded_at=timezone.now())
            record.pk = None
            record.superseded_at = None
            record.save()
    return record


def test_a_turns_outcome_is_its_reply_and_its_current_record(tenant_a, member_a, conversation_a):
    current = _answered_turn(conversation_a, member_a, superseded=True)
    question = current.user_message
    assert question is not None
    reply, record = turn_outcome(conversation_a, question.pk)
    expected_reply = reply_to(tenant_a.pk, question.pk)
    expected_record = turn_record_for(conversation_a, question.pk)
    assert reply is not None and expected_reply is not None
    assert record is not None and expected_record is not None and record.pk == current.pk
    _same(reply, expected_reply)
    _same(record, expected_record)
    _same(record.model_profile, expected_record.model_profile)
    assert reply.author is None


def test_a_turn_without_a_reply_or_record_has_none(tenant_a, member_a, conversation_a):
    question = add_message(conversation_a, member_a, "Anyone?")
    assert turn_outcome(conversation_a, question.pk) == (None, None)
    assert turn_outcome(conversation_a, question.pk + 1000) == (None, None)


def test_another_tenants_turn_has_no_outcome_here(conversation_a, tenant_b, member_b):
    theirs = make_conversation(tenant_b, member_b, title="Theirs")
    question = _answered_turn(theirs, member_b).user_message
    assert question is not None
    assert turn_outcome(conversation_a, question.pk) == (None, None)


def test_the_reads_use_one_statement_each_on_postgresql(
    tenant_a, member_a, conversation_a, django_assert_num_queries
):
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement reads are PostgreSQL's")
    _, raw = api_key_create(tenant=tenant_a, name="app", user=member_a)
    assert authenticate_api_key(raw) is not None  # its first use is written, once a minute
    with django_assert_num_queries(1):
        assert authenticate_api_key(raw) is not None
    with django_assert_num_queries(1):
        assert conversation_for_member(member_a, conversation_a.pk) is not None
    with django_assert_num_queries(1):
        turn_outcome(conversation_a, 1)
