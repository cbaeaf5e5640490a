from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def transfer_root(settings, tmp_path):
    """Imports and exports write to a folder of the test's own."""
    settings.TRANSFER_ROOT = tmp_path / "transfers"
    return settings.TRANSFER_ROOT


@pytest.fixture
def followups(monkeypatch):
    """The conversations whose after-import work was queued (the task is run by the test)."""
    from chats.transfer import followup

    queued: list[tuple[int, list[int]]] = []
    monkeypatch.setattr(
        followup.process_imported_conversations,
        "delay",
        lambda tenant_id, ids: queued.append((tenant_id, list(ids))),
    )
    return queued


@pytest.fixture
def jobs_run(monkeypatch):
    """Queued transfer jobs run at once, in this process, after the commit (as a worker
    would run them)."""
    from chats.transfer import tasks

    ran: list[int] = []

    def run(tenant_id, transfer_id):
        ran.append(transfer_id)
        return tasks.run_transfer(tenant_id, transfer_id)

    monkeypatch.setattr(tasks.run_transfer, "delay", run)
    return ran
