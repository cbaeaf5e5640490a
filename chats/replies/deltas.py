"""Sending a growing reply to the conversation's sockets as numbered deltas."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from chats.replies.coordination import Coordination
from chats.replies.events import Addressed, emit

logger = logging.getLogger(__name__)

#: At most one delta per this many seconds after the first (a reader cannot tell the
#: difference from token-by-token streaming).
DELTA_INTERVAL = 0.03


class DeltaSender:
    """Turns text pieces into deltas ``1, 2, ...`` logged in the delta log (for resuming
    sockets) and broadcast to the conversation's group.

    A background task does the sending, so the provider's stream is never paced by Redis:
    the first text goes out at once, and whatever arrives while a send is in flight (or
    within ``DELTA_INTERVAL`` of it) goes out together in the next delta. A failed send is
    logged and the text is not resent: the stored reply is the truth a client resyncs from.

    ``lead`` (events with their origins: the ``reply`` event announcing the reply, and the
    user message's own event when it was not sent yet) is handed over once and goes out
    first, as soon as the task runs: alone when the provider is still thinking, or in the
    same round trip as the first delta when the text came at once. :meth:`flush` returns
    only after it went out (or its send failed, which is logged).
    """

    def __init__(
        self,
        hub: Coordination,
        tenant_id: int,
        conversation_id: int,
        message_id: int,
        *,
        lead: Sequence[Addressed] = (),
    ) -> None:
        self._hub = hub
        self._tenant_id = tenant_id
        self._conversation_id = conversation_id
        self._message_id = message_id
        self._pending: list[str] = []
        #: Sent with the first send, then gone.
        self._lead: tuple[Addressed, ...] = tuple(lead)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.seq = 0
        if self._lead:
            self._wake.set()
            self._task = asyncio.create_task(self._run())

    def add(self, text: str) -> None:
        self._pending.append(text)
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def flush(self) -> int:
        """Send what is pending, stop the task; returns the last sequence number sent."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
        return self.seq

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._pending or self._lead:
                started = time.monotonic()
                sent_text = await self._send()
                pause = DELTA_INTERVAL - (time.monotonic() - started)
                if sent_text and pause > 0 and not self._closing:
                    await asyncio.sleep(pause)
            if self._closing and not self._pending:
                return

    async def _send(self) -> bool:
        """Send the lead and what is pending; returns whether text went out."""
        leading, self._lead = self._lead, ()
        events: list[dict[str, Any]] = []
        delta = None
        if self._pending:
            text = "".join(self._pending)
            self._pending.clear()
            self.seq += 1
            delta = (self._tenant_id, self._message_id, self.seq, text)
            events.append(
                {"type": "delta", "message_id": self._message_id, "seq": self.seq, "text": text}
            )
        try:
            await emit(
                self._tenant_id,
                self._conversation_id,
                events,
                delta=delta,
                hub=self._hub,
                leading=leading,
            )
        except Exception:
            logger.warning(
                "delta %s of reply %s not sent", self.seq, self._message_id, exc_info=True
            )
        return delta is not None
