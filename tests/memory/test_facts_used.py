"""A fact that goes into a sent prompt is marked used (``last_used_at``, shown by the REST
API); a fact the prompt left out is not."""

from __future__ import annotations

import pytest

from chatplatform.tenancy.scoping import tenant_scope
from chats.replies.turns import turn_prepare
from memory.models import UserFact
from memory.services import fact_save
from tests.api.helpers import add_message
from tests.factories import make_conversation, make_member

pytestmark = pytest.mark.django_db


def test_the_facts_in_a_prompt_are_marked_used_after_commit(
    tenant_a, member_a, django_capture_on_commit_callbacks
):
    bob = make_member(tenant_a, username="bob")
    private = fact_save(tenant_a, member_a, "Allergic to penicillin")
    shared = fact_save(tenant_a, member_a, "Likes spicy food", shareable=True)
    # A group chat: only the shareable fact goes into the prompt.
    group = make_conversation(tenant_a, member_a, title="Team", participants=[bob])
    question = add_message(group, member_a, "What should we cook tonight?")

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        prepared = turn_prepare(tenant_a.pk, question.pk)
    assert prepared is not None
    with tenant_scope(tenant_a):
        assert not UserFact.objects.filter(last_used_at__isnull=False).exists()
    for callback in callbacks:
        callback()

    with tenant_scope(tenant_a):
        used = dict(UserFact.objects.values_list("pk", "last_used_at"))
    assert used[shared.pk] is not None
    assert used[private.pk] is None
