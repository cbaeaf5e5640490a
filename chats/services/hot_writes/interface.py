"""What the reply path writes on every turn, as one interface with one implementation per
database (:mod:`.postgres`: single statements; :mod:`.orm`: the ORM, for SQLite and any
other database). Both store the same rows; ``tests/chats/test_hot_writes_contract.py``
proves it on whichever database the suite runs on.

Callers pass plain values and instances and never ask which database they are on:
:func:`chats.services.hot_writes.hot_writes` picks the implementation.
"""

from __future__ import annotations

import abc
from datetime import datetime
from typing import Any

from chatplatform.models.conversations import Message, TurnRecord
from chatplatform.spending import SpendEntry

#: A user message (conversation and author loaded), its reply's id and status (None and ""
#: without one).
MessageAndReply = tuple[Message, int | None, str]


class HotWrites(abc.ABC):
    """The writes of a turn (and the one read they depend on). Every operation filters on
    the tenant it is given (``fields["tenant_id"]`` for the inserts) and works whatever
    tenant scope is active, or none."""

    @abc.abstractmethod
    def message_insert(
        self,
        fields: dict[str, Any],
        tokens_added: int,
        now: datetime,
        *,
        extra: dict[str, Any] | None = None,
        own_transaction: bool = True,
    ) -> Message:
        """Insert a message (``fields`` as ``Message(**fields)`` takes them, without ``seq``;
        ``extra`` more of them: an attachment's, a tool round's), allocating its sequence
        number and counting ``tokens_added`` in the conversation's totals; returns the saved
        instance.

        ``own_transaction``: the insert is atomic by itself, so a duplicate leaves the
        caller's transaction usable; otherwise the caller's open transaction holds it.
        Raises IntegrityError for a duplicate (same client id, or a second reply to one
        message: nothing changed), Conversation.DoesNotExist when the conversation is gone.
        """

    @abc.abstractmethod
    def reply_insert_with_record(
        self, fields: dict[str, Any], record: TurnRecord, now: datetime
    ) -> Message:
        """Insert a reply row (``fields`` as for :meth:`message_insert`; it adds no tokens
        to the conversation's total yet) and the record of its turn (an unsaved TurnRecord
        whose ``assistant_message`` becomes the new row), atomically; sets the record's
        primary key and returns the saved reply.

        Raises IntegrityError when the message already has a reply or a record (nothing
        changed), Conversation.DoesNotExist when the conversation is gone.
        """

    @abc.abstractmethod
    def reply_finish(
        self,
        *,
        tenant_id: int,
        message_id: int,
        user_message_id: int,
        content: str,
        status: str,
        token_count: int,
        token_counter: str,
        tokens_added: int,
        error_code: str,
        error_message: str,
        turn: dict[str, Any],
        now: datetime,
        spend: SpendEntry | None = None,
    ) -> bool:
        """Store a reply's final text, status and token count, add ``tokens_added`` to its
        conversation's history total and the usage ``turn`` (TurnRecord fields) to the
        current record of the turn (never a superseded one), and, when that record exists,
        the turn's bill ``spend`` to its month's totals, atomically. Returns whether the record
        exists. A reply of another tenant is left as it is."""

    @abc.abstractmethod
    def message_for_reply(self, tenant_id: int, message_id: int) -> MessageAndReply | None:
        """The user message ``message_id`` of the tenant with its conversation and author
        loaded, and its reply's id and status; None when there is no such message."""
