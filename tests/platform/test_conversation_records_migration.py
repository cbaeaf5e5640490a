"""The conversation records carry the platform's app label; a database migrated while they
carried the chats app's keeps its tables, rows and foreign keys, and their content types (with
the permissions and admin log entries that point at them) follow the label."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from memory.services import fact_save
from summaries.models import Summary
from tests.factories import make_message, summary

pytestmark = pytest.mark.django_db(transaction=True)

#: The last migrations of each app while the records carried the chats app's label.
BEFORE = [
    ("chatplatform", "0017_policy_oversized_message"),
    ("chats", "0010_message_client_id_per_author"),
    ("summaries", "0005_compaction_kind"),
    ("memory", "0003_userfact_shareable"),
]
#: The migrations that moved them (later ones may change the schema further).
MOVED = [
    ("chatplatform", "0018_conversation_records"),
    ("chats", "0011_conversation_records"),
    ("summaries", "0006_conversation_records"),
    ("memory", "0004_conversation_records"),
]
RECORDS = ("conversation", "participant", "message", "messagerevision", "turnrecord")


def migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def latest() -> list[tuple[str, str]]:
    executor = MigrationExecutor(connection)
    return [key for key in executor.loader.graph.leaf_nodes() if key[0] in dict(BEFORE)]


def schema() -> dict[str, Any]:
    """Every table of the four apps with its columns and constraints."""
    with connection.cursor() as cursor:
        tables = sorted(
            name
            for name in connection.introspection.table_names(cursor)
            if name.split("_")[0] in {"chats", "chatplatform", "summaries", "memory"}
        )
        return {
            table: (
                sorted(
                    c.name for c in connection.introspection.get_table_description(cursor, table)
                ),
                _constraints(connection.introspection.get_constraints(cursor, table)),
            )
            for table in tables
        }


def _constraints(found: dict[str, Any]) -> list[tuple[str, str]]:
    """The constraints by name and definition; SQLite's unnamed foreign keys are numbered
    by their column's place in the table (which a rebuilt table may change), so they are
    compared by definition alone."""
    return sorted(
        ("fk" if name.startswith("fk_") and connection.vendor == "sqlite" else name, repr(item))
        for name, item in found.items()
    )


def labels() -> dict[str, tuple[int, str]]:
    return {
        ct.model: (ct.pk, ct.app_label)
        for ct in ContentType.objects.filter(
            model__in=RECORDS, app_label__in=["chats", "chatplatform"]
        )
    }


def test_the_records_carry_the_platforms_label_and_keep_their_tables() -> None:
    assert Conversation._meta.app_label == "chatplatform"
    assert Message._meta.label == "chatplatform.Message"
    assert Message._meta.db_table == "chats_message"
    assert Summary._meta.get_field("conversation").related_model is Conversation
    assert Summary._meta.get_field("first_message").related_model is Message


def test_a_database_from_before_the_move_keeps_its_rows_foreign_keys_and_content_types(
    tenant_a: Any, member_a: Any, conversation_a: Conversation
) -> None:
    tenant, user, conversation = tenant_a, member_a, conversation_a
    first = make_message(conversation, "I live in Lyon.", author=user)
    make_message(conversation, "Noted.", role="assistant")
    summary(conversation, 1, 2, "The user lives in Lyon.", first_message=first)
    fact = fact_save(tenant, user, "Lives in Lyon", key="city", source_message=first)
    message_type = ContentType.objects.get_for_model(Message)
    LogEntry.objects.create(
        user=user,
        content_type=message_type,
        object_id=str(first.pk),
        object_repr="message",
        action_flag=CHANGE,
    )
    after = latest()
    tables_after = schema()
    types_after = labels()
    assert {label for _, label in types_after.values()} == {"chatplatform"}

    try:
        migrate(MOVED)
        tables_moved = schema()
        old = migrate(BEFORE)
        # The state before the move: the records are the chats app's, the database is the same.
        assert schema() == tables_moved
        assert {model: pk for model, (pk, _) in labels().items()} == {
            model: pk for model, (pk, _) in types_after.items()
        }
        assert {label for _, label in labels().values()} == {"chats"}
        OldMessage = old.get_model("chats", "Message")
        assert OldMessage.objects.filter(conversation_id=conversation.pk).count() == 2
        OldFact = old.get_model("memory", "UserFact")
        assert OldFact.objects.get(pk=fact.pk).source_message_id == first.pk
    finally:
        migrate(after)

    assert schema() == tables_after
    assert labels() == types_after
    with tenant_scope(tenant):
        assert list(
            Message.objects.filter(conversation=conversation).values_list("content", flat=True)
        ) == ["I live in Lyon.", "Noted."]
        stored = Summary.objects.select_related("first_message").get(conversation=conversation)
        assert stored.first_message == first
        entry = LogEntry.objects.get(object_id=str(first.pk))
        assert entry.content_type_id == message_type.pk
        assert entry.get_edited_object() == first
