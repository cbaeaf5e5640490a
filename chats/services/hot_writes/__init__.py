"""Every write of the reply path that runs on each turn, in one place: the user message with
its conversation's counters, the reply row with the record of its turn, and the reply's
finish with the conversation's token total and the turn's usage.

PostgreSQL gets single statements (:mod:`.postgres`, measured CPU per turn in
``docs/scaling.md``); other databases the ORM (:mod:`.orm`). :func:`hot_writes` picks one by
the connection's vendor, so callers never branch on the database.
"""

from __future__ import annotations

from django.db import connection

from .interface import HotWrites, MessageAndReply
from .orm import OrmHotWrites
from .postgres import PostgresHotWrites

__all__ = ["HotWrites", "MessageAndReply", "OrmHotWrites", "PostgresHotWrites", "hot_writes"]

_ORM = OrmHotWrites()
_BY_VENDOR: dict[str, HotWrites] = {"postgresql": PostgresHotWrites()}


def hot_writes() -> HotWrites:
    """The implementation for the current connection's database."""
    return _BY_VENDOR.get(connection.vendor, _ORM)
