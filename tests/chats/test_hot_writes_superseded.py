"""The hot writes' contract for superseded turn records (a regenerated or edited reply keeps its
earlier turn's record): the finish of the new reply writes only the current record, on both
implementations (the PostgreSQL one on PostgreSQL only), and the database keeps one current
record per user message."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from chatplatform.models.conversations import TurnRecord
from chatplatform.tenancy.scoping import tenant_scope
from chats.services.hot_writes import HotWrites, OrmHotWrites, PostgresHotWrites
from chats.services.hot_writes.postgres import USAGE_FIELDS
from tests.chats.test_hot_writes_contract import _finish, _record, _streaming_turn, _usage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(
    params=[
        pytest.param(OrmHotWrites(), id="orm"),
        pytest.param(PostgresHotWrites(), id="postgres", marks=pytest.mark.postgres),
    ]
)
def writes(request: pytest.FixtureRequest) -> HotWrites:
    return request.param


def test_finish_writes_the_current_record_never_a_superseded_one(writes, conversation, member_a):
    """A regenerated reply's earlier turn stays, superseded, with what it was billed; the new
    reply's finish writes its usage on the current record only."""
    now = timezone.now().replace(microsecond=0)
    question, reply = _streaming_turn(conversation, member_a, now)
    with tenant_scope(conversation.tenant_id):
        TurnRecord.objects.filter(user_message=question).update(
            superseded_at=now, completion_tokens=7, cost_usd=Decimal("0.5")
        )
        current = _record(conversation, question)
        current.assistant_message_id = reply.pk
        current.save()
        with pytest.raises(IntegrityError), transaction.atomic():
            _record(conversation, question).save()  # one current record per message
    usage = _usage(reply, completion_tokens=2, cost_usd=Decimal("0.000125"))
    assert _finish(writes, conversation.tenant_id, reply, question, now, turn=usage)
    with tenant_scope(conversation.tenant_id):
        superseded = TurnRecord.objects.get(user_message=question, superseded_at__isnull=False)
        stored = TurnRecord.objects.current().get(user_message=question)
    assert (superseded.completion_tokens, superseded.cost_usd) == (7, Decimal("0.5"))
    assert stored.pk == current.pk
    assert {name: getattr(stored, name) for name in USAGE_FIELDS} == usage
