"""The Account page: an uploaded export imported by a job that reports its progress, exports
as jobs whose file only its owner downloads while the link holds (tenants never see each
other's), the beat job that removes expired files."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.utils import timezone

from chatplatform.models import Transfer, TransferStatus
from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.transfer import jobs, tasks
from chats.transfer.files import transfer_storage
from tests.factories import make_conversation, make_member, make_message
from tests.transfer.exports import chatgpt_export

pytestmark = pytest.mark.django_db(transaction=True)


def upload(client, data: bytes, fmt: str = "chatgpt"):
    return client.post(
        "/account/import/",
        {"format": fmt, "file": SimpleUploadedFile("conversations.json", data)},
    )


def latest(tenant) -> Transfer:
    with tenant_scope(tenant):
        found = Transfer.objects.order_by("-pk").first()
    assert found is not None
    return found


def test_the_page_is_linked_and_lists_nothing_yet(client, member_a):
    client.force_login(member_a)
    home = client.get("/chats/")
    assert b'href="/account/"' in home.content
    page = client.get("/account/")
    assert page.status_code == 200
    assert b"Import conversations" in page.content and b"None yet." in page.content


def test_an_upload_is_imported_by_a_job_with_progress(
    client, tenant_a, member_a, jobs_run, followups, monkeypatch
):
    seen: list[tuple[int, int]] = []
    real = jobs.transfer_progress

    def spy(transfer, done, total):
        seen.append((done, total))
        real(transfer, done, total)

    monkeypatch.setattr(jobs, "transfer_progress", spy)
    client.force_login(member_a)
    response = upload(client, chatgpt_export())
    assert response.status_code == 302
    transfer = latest(tenant_a)
    assert transfer.status == TransferStatus.DONE and jobs_run == [transfer.pk]
    assert transfer.result == {"conversations": 2, "messages": 6, "skipped": 0}
    assert seen == [(1, 2), (2, 2)]
    assert transfer.file == ""  # the upload is removed once imported
    with tenant_scope(tenant_a):
        assert Conversation.objects.filter(created_by=member_a).count() == 2
    page = client.get("/account/").content.decode()
    assert "2 new conversations, 6 messages added, 0 already there" in page
    upload(client, chatgpt_export())
    assert latest(tenant_a).result == {"conversations": 0, "messages": 0, "skipped": 6}


def test_a_running_import_shows_its_progress(client, tenant_a, member_a, monkeypatch):
    monkeypatch.setattr(tasks.run_transfer, "delay", lambda *a: None)  # no worker yet
    client.force_login(member_a)
    upload(client, chatgpt_export())
    transfer = latest(tenant_a)
    jobs.transfer_running(transfer)
    jobs.transfer_progress(transfer, 1, 2)
    page = client.get("/account/").content.decode()
    assert "Running: 1 of 2 conversations" in page and 'http-equiv="refresh"' in page


def test_a_malformed_upload_fails_the_job_and_stores_nothing(
    client, tenant_a, member_a, jobs_run, followups
):
    client.force_login(member_a)
    upload(client, b'[{"title": "broken"}]')
    transfer = latest(tenant_a)
    assert transfer.status == TransferStatus.FAILED
    assert "has no field 'mapping'" in transfer.error and "Nothing was imported" in transfer.error
    with tenant_scope(tenant_a):
        assert not Message.objects.exists()
    assert "Failed: conversation 1" in client.get("/account/").content.decode()


def test_an_upload_over_the_limit_is_refused(client, tenant_a, member_a, settings, jobs_run):
    settings.TRANSFER_IMPORT_MAX_BYTES = 100
    client.force_login(member_a)
    response = upload(client, chatgpt_export())
    assert response.status_code == 302
    with tenant_scope(tenant_a):
        assert not Transfer.objects.exists()


def download_link(client) -> str:
    page = client.get("/account/").content.decode()
    start = page.index('href="/account/downloads/') + len('href="')
    return page[start : page.index('"', start)]


def test_export_round_trip_and_download(
    client, tenant_a, member_a, tenant_b, jobs_run, followups, tmp_path
):
    typed = make_conversation(tenant_a, member_a, title="Typed here")
    make_message(typed, "Hello from the platform", author=member_a)
    client.force_login(member_a)
    upload(client, chatgpt_export())
    client.post("/account/export/", {"format": "claude"})
    export = latest(tenant_a)
    assert export.status == TransferStatus.DONE
    assert export.result["conversations"] == 3 and export.result["messages"] == 7
    link = download_link(client)
    response = client.get(link)
    assert response.status_code == 200
    data = b"".join(response.streaming_content)
    items = json.loads(data)
    assert {i["name"] for i in items} == {"Typed here", "Lisbon weekend", "Tea"}
    # Imported again into the same account: nothing new.
    path = tmp_path / "export.json"
    path.write_bytes(data)
    out = io.StringIO()
    args = ["--format", "claude", "--tenant", tenant_a.slug, "--json"]
    call_command("import_conversations", str(path), *args, "--user", member_a.username, stdout=out)
    assert json.loads(out.getvalue()) == {"conversations": 0, "messages": 0, "skipped": 7}
    # Into a fresh account: the same conversations.
    fresh = make_member(tenant_a, username="fresh-a")
    out = io.StringIO()
    call_command("import_conversations", str(path), *args, "--user", fresh.username, stdout=out)
    assert json.loads(out.getvalue()) == {"conversations": 3, "messages": 7, "skipped": 0}
    with tenant_scope(tenant_a):
        lisbon = Conversation.objects.get(created_by=fresh, title="Lisbon weekend")
        texts = list(Message.objects.filter(conversation=lisbon).values_list("content", flat=True))
    assert texts[-1] == "É o elétrico 28."

    # Nobody else downloads it: another member, another tenant's admin, logged out.
    other = make_member(tenant_a, username="other-a")
    client.force_login(other)
    assert client.get(link).status_code == 404
    from tests.factories import make_admin

    client.force_login(make_admin(tenant_b, username="admin-b2"))
    assert client.get(link).status_code == 404
    client.logout()
    assert client.get(link).status_code == 302
    # A forged link.
    client.force_login(member_a)
    assert client.get(link[:-3] + "xyz/").status_code == 404


def test_markdown_export_is_a_zip_of_documents(client, tenant_a, member_a, jobs_run, followups):
    client.force_login(member_a)
    upload(client, chatgpt_export())
    client.post("/account/export/", {"format": "markdown"})
    response = client.get(download_link(client))
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    names = sorted(archive.namelist())
    assert names == ["0001-lisbon-weekend.md", "0002-tea.md"]
    text = archive.read(names[0]).decode()
    assert text.startswith("# Lisbon weekend") and "## Assistant" in text
    assert "FIRST ATTEMPT" not in text


def test_an_expired_link_is_refused_and_the_beat_job_removes_the_file(
    client, tenant_a, member_a, jobs_run, settings
):
    make_message(make_conversation(tenant_a, member_a), "hi", author=member_a)
    client.force_login(member_a)
    client.post("/account/export/", {"format": "claude"})
    link, export = download_link(client), latest(tenant_a)
    assert transfer_storage().exists(export.file)
    with tenant_scope(tenant_a):
        Transfer.objects.filter(pk=export.pk).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
    assert client.get(link).status_code == 404
    assert tasks.remove_expired_exports() == 1
    assert tasks.remove_expired_exports() == 0  # idempotent
    assert not transfer_storage().exists(export.file)
    assert latest(tenant_a).file == ""
    # A link older than TRANSFER_LINK_HOURS is refused by its signature too.
    settings.TRANSFER_LINK_HOURS = 0
    assert client.get(link).status_code == 404


def test_an_import_past_the_jobs_time_fails_once_and_stores_nothing(
    client, tenant_a, member_a, jobs_run, followups, monkeypatch
):
    from celery.exceptions import SoftTimeLimitExceeded

    def slow(*args, **kwargs):
        raise SoftTimeLimitExceeded()  # the job's time ran out inside the import

    monkeypatch.setattr(tasks, "conversations_import_file", slow)
    client.force_login(member_a)
    upload(client, chatgpt_export())
    transfer = latest(tenant_a)
    assert transfer.status == TransferStatus.FAILED and "smaller files" in transfer.error
    assert tasks.run_transfer(tenant_a.pk, transfer.pk) == TransferStatus.FAILED  # not again
    with tenant_scope(tenant_a):
        assert not Message.objects.exists()
