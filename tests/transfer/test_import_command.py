"""``manage.py import_conversations``: ChatGPT's tree read along its current branch, Claude's
export, original times and token counts kept, the work after typed messages queued after the
commit, a second import adding nothing, and a malformed file storing nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.transfer.followup import process_imported_conversations
from memory.models import UserFact
from tests.transfer.exports import (
    T0,
    TEA,
    chatgpt_export,
    chatgpt_simple,
    chatgpt_tree,
    claude_export,
)

pytestmark = pytest.mark.django_db(transaction=True)


def run(tmp_path, data: bytes, *args: str, fmt: str = "chatgpt", name: str = "c.json") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    out = StringIO()
    call_command("import_conversations", str(path), "--format", fmt, *args, stdout=out)
    return out.getvalue()


def imported(tenant, user) -> dict[str, list[Message]]:
    with tenant_scope(tenant):
        return {
            c.title: list(Message.objects.filter(conversation=c).order_by("seq"))
            for c in Conversation.objects.filter(created_by=user).order_by("pk")
        }


def test_chatgpt_current_branch_times_counts_and_followups(tmp_path, tenant_a, member_a, followups):
    out = run(
        tmp_path, chatgpt_export(), "--tenant", tenant_a.slug, "--user", member_a.username, "--json"
    )
    assert json.loads(out) == {"conversations": 2, "messages": 6, "skipped": 0}
    found = imported(tenant_a, member_a)
    lisbon = found["Lisbon weekend"]
    assert [(m.role, m.content) for m in lisbon] == [
        ("user", "Plan a weekend in Lisbon."),
        ("assistant", "Day one: Alfama. Day two: Belém."),
        ("user", "[image not imported]\n\nFrom now on, answer in Portuguese. Where is this?"),
        ("assistant", "É o elétrico 28."),
    ]
    assert [m.created_at for m in lisbon] == [
        datetime.fromtimestamp(T0 + s, tz=UTC) for s in (10, 30, 50, 60)
    ]
    assert all(m.token_count and m.token_counter for m in lisbon)
    assert lisbon[0].author_id == member_a.pk and lisbon[1].author_id is None
    assert lisbon[1].answers_id == lisbon[0].pk and lisbon[3].answers_id == lisbon[2].pk
    assert lisbon[0].client_id == "import:chatgpt:u1"
    with tenant_scope(tenant_a):
        conversation = Conversation.objects.get(title="Lisbon weekend")
    assert conversation.created_at == datetime.fromtimestamp(T0, tz=UTC)
    assert conversation.source_id == "6601d1c2-aaaa-4bbb-8ccc-000000000001"
    assert conversation.message_count == 4 and conversation.history_tokens > 0
    # After the commit, the typed messages' work: memories from the user's own words.
    assert len(followups) == 1 and followups[0][0] == tenant_a.pk
    assert process_imported_conversations(*followups[0]) == 2
    with tenant_scope(tenant_a):
        memory = UserFact.objects.get(user=member_a)
    assert "Portuguese" in memory.text and memory.source_message_id == lisbon[2].pk
    assert process_imported_conversations(*followups[0]) == 2  # idempotent
    with tenant_scope(tenant_a):
        assert UserFact.objects.filter(user=member_a).count() == 1


def test_a_second_import_adds_nothing_and_a_longer_export_only_what_is_new(
    tmp_path, tenant_a, member_a, followups
):
    args = ("--tenant", tenant_a.name, "--user", member_a.username, "--json")
    run(tmp_path, chatgpt_export(), *args)
    again = json.loads(run(tmp_path, chatgpt_export(), *args))
    assert again == {"conversations": 0, "messages": 0, "skipped": 6}
    longer = chatgpt_simple("c2", "Tea", [*TEA, ("user", "And green tea?")])
    more = json.loads(run(tmp_path, chatgpt_export(chatgpt_tree(), longer), *args))
    assert more == {"conversations": 0, "messages": 1, "skipped": 6}
    tea = imported(tenant_a, member_a)["Tea"]
    assert [m.content for m in tea][-1] == "And green tea?" and [m.seq for m in tea] == [1, 2, 3]
    assert len(followups) == 2  # nothing new, nothing queued


def test_claude_export(tmp_path, tenant_a, member_a, followups):
    out = run(
        tmp_path,
        claude_export(),
        "--tenant",
        tenant_a.slug,
        "--user",
        member_a.username,
        "--json",
        fmt="claude",
    )
    assert json.loads(out) == {"conversations": 1, "messages": 3, "skipped": 0}
    messages = imported(tenant_a, member_a)["Sourdough"]
    assert [m.content for m in messages] == [
        "How long should the levain rest?",
        "About 4 to 12 hours,\n\ndepending on the kitchen.",
        "Thanks!",
    ]
    assert messages[1].created_at == datetime(2024, 6, 1, 8, 0, 30, tzinfo=UTC)


def test_a_zip_as_the_service_sends_it(tmp_path, tenant_a, member_a, followups):
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("chat.html", "<html></html>")
        archive.writestr("conversations.json", chatgpt_export())
    out = run(
        tmp_path,
        buffer.getvalue(),
        "--tenant",
        tenant_a.slug,
        "--user",
        member_a.username,
        "--json",
        name="export.zip",
    )
    assert json.loads(out)["messages"] == 6


@pytest.mark.parametrize(
    ("data", "fmt", "said"),
    [
        (b"[{]", "chatgpt", "not valid JSON"),
        (b'{"title": "x"}', "chatgpt", "list of conversations"),
        (json.dumps([{"title": "No tree"}]).encode(), "chatgpt", "has no field 'mapping'"),
        (
            json.dumps([{"uuid": "u", "name": "N", "chat_messages": [{"uuid": "m"}]}]).encode(),
            "claude",
            "has no field 'sender'",
        ),
        (b"[]", "gemini", "Unknown format"),
        (b"", "claude", "empty"),
    ],
)
def test_a_malformed_file_says_what_is_wrong_and_stores_nothing(
    tmp_path, tenant_a, member_a, data, fmt, said, followups
):
    # A good conversation before the bad one in the same file: still nothing stored.
    if data.startswith(b"[{") and data != b"[{]":
        items = json.loads(data)
        first = chatgpt_tree() if fmt == "chatgpt" else json.loads(claude_export())[0]
        data = json.dumps([first, *items]).encode()
    with pytest.raises(CommandError, match=said) as raised:
        path = tmp_path / "bad.json"
        path.write_bytes(data)
        call_command(
            "import_conversations",
            str(path),
            "--format",
            fmt,
            "--tenant",
            tenant_a.slug,
            "--user",
            member_a.username,
        ) if fmt in ("chatgpt", "claude") else _unknown_format(tenant_a, member_a, data)
    assert "Nothing was imported" in str(raised.value) or fmt == "gemini"
    with tenant_scope(tenant_a):
        assert not Conversation.objects.exists() and not Message.objects.exists()
    assert followups == []


def _unknown_format(tenant, user, data):
    from chatplatform.core.transfer.records import TransferFormatError
    from chats.transfer.conversation_import import conversations_import_file

    try:
        conversations_import_file(tenant, user, "gemini", data or b"[]", max_bytes=1000)
    except TransferFormatError as exc:
        raise CommandError(str(exc)) from None


def test_an_import_for_a_member_of_a_touches_nothing_of_b(
    tmp_path, tenant_a, member_a, tenant_b, member_b, followups
):
    run(tmp_path, chatgpt_export(), "--tenant", tenant_a.slug, "--user", member_a.username)
    with tenant_scope(tenant_b):
        assert not Conversation.objects.exists() and not Message.objects.exists()
    with pytest.raises(CommandError, match="not a member"):
        run(tmp_path, chatgpt_export(), "--tenant", tenant_b.slug, "--user", member_a.username)
    with tenant_scope(tenant_b):
        assert not Conversation.objects.exists()


def test_the_human_readable_summary(tmp_path, tenant_a, member_a, followups):
    out = run(tmp_path, chatgpt_export(), "--tenant", tenant_a.slug, "--user", member_a.username)
    assert "Imported 2 new conversations and 6 messages" in out
