"""Model-provider faults end to end: a WebSocket client sends a message, the reply pipeline
calls the fake Anthropic / OpenAI-compatible server through the real SDK, and the fault
happens on the wire. For every fault and both providers the test checks what the retry
policy did (requests sent, backoff delays), the frames the client got and the stored rows.

The invariants: only retryable errors are retried, and only before any text went out, with
capped jittered backoff (a retry-after is honoured exactly when within the cap); nothing ends
as an empty success; the user gets either a complete reply or a clear error whose partial
text is kept (frames and row agree). The provider-level mapping of each fault is unit-tested
in tests/llm; this is the whole path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from channels.db import database_sync_to_async

from chats.replies import runner
from chats.services import conversation_create
from tests.durability.helpers import (
    SdkProviders,
    final_frame,
    receive_until,
    rows_async,
    ws_connect,
)
from tests.fakes import behaviours as b
from tests.replies.test_pipeline_providers import use_model

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

OK_TEXT = "Made it after all, here is the answer."
CUT_TEXT = "One two three four five six seven."
PARTIAL = "One two three "


@dataclass(frozen=True)
class Case:
    script: tuple[Any, ...]
    status: str  # final row status
    code: str = ""  # error code (frame and row) when not complete
    requests: int = 1  # model requests the fake received
    delays: tuple[float, ...] | None = None  # exact backoff delays, when they are fixed
    retries: int = 0  # number of backoff sleeps (checked against the cap)
    content: str = ""


CASES: dict[str, Case] = {
    "529_then_ok": Case((b.overloaded(), b.Reply(OK_TEXT)), "complete", requests=2, retries=1),
    "529_exhausted": Case((b.overloaded(),) * 3, "failed", "overloaded", requests=3, retries=2),
    "500_then_ok": Case((b.server_error(), b.Reply(OK_TEXT)), "complete", requests=2, retries=1),
    "429_retry_after": Case(
        (b.rate_limited(1), b.Reply(OK_TEXT)), "complete", requests=2, delays=(1.0,)
    ),
    "429_retry_after_beyond_cap": Case(
        (b.rate_limited(30),), "failed", "rate_limited", requests=1, delays=()
    ),
    "429_without_retry_after": Case(
        (b.spend_cap(),), "failed", "spend_cap_reached", requests=1, delays=()
    ),
    "400_invalid_request": Case(
        (b.invalid_request(),), "failed", "invalid_request", requests=1, delays=()
    ),
    "413_request_too_large": Case(
        (b.request_too_large(),), "failed", "request_too_large", requests=1, delays=()
    ),
    # Too long twice: the pipeline re-assembles once with a smaller budget, then gives up.
    "400_prompt_too_long_twice": Case(
        (b.prompt_too_long(3000, 2000), b.prompt_too_long(2500, 2000)),
        "failed",
        "prompt_too_long",
        requests=2,
        delays=(),
    ),
    "error_event_after_deltas": Case(
        (b.ErrorAfter(3, text=CUT_TEXT),),
        "incomplete",
        "stream_interrupted",
        content=PARTIAL,
        delays=(),
    ),
    "error_event_before_text": Case(
        (b.ErrorAfter(0, text=CUT_TEXT), b.Reply(OK_TEXT)), "complete", requests=2, retries=1
    ),
    "stall_after_deltas": Case(
        (b.Stall(3, seconds=10, text=CUT_TEXT),),
        "incomplete",
        "stream_stalled",
        content=PARTIAL,
        delays=(),
    ),
    "stall_before_text": Case(
        (b.Stall(0, seconds=10, text=CUT_TEXT), b.Reply(OK_TEXT)),
        "complete",
        requests=2,
        retries=1,
    ),
    "disconnect_after_deltas": Case(
        (b.Disconnect(3, text=CUT_TEXT),),
        "incomplete",
        "stream_interrupted",
        content=PARTIAL,
        delays=(),
    ),
}


def openai_flavour(case: Case) -> Case:
    """The same fault in an OpenAI-compatible server's words."""
    script = tuple(
        b.context_length_exceeded(9000, 8192)
        if isinstance(x, b.HttpError) and "prompt is too long" in x.message
        else x
        for x in case.script
    )
    return Case(**{**case.__dict__, "script": script})


@pytest.fixture
def chat(tenant_a, member_a):
    def make(provider: str):
        use_model(tenant_a, provider=provider)
        return conversation_create(tenant=tenant_a, created_by=member_a, title=provider)

    return make


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_fault_end_to_end(
    provider, name, chat, member_a, fake_anthropic, fake_openai
) -> None:
    case = CASES[name] if provider == "anthropic" else openai_flavour(CASES[name])
    fake, path = (
        (fake_anthropic, "/v1/messages")
        if provider == "anthropic"
        else (fake_openai, "/v1/chat/completions")
    )
    providers = SdkProviders(anthropic_url=fake_anthropic.url, openai_url=fake_openai.url)
    runner.provider_factory_set(providers)
    fake.script(*case.script)
    conversation = await database_sync_to_async(chat)(provider)

    ws = await ws_connect(conversation, member_a)
    await ws.send_json_to({"type": "message", "client_id": f"{name}", "content": "Hello?"})
    frames = await receive_until(ws, final_frame)
    await ws.disconnect()

    # What the retry policy did.
    assert len(fake.requests_to(path)) == case.requests
    if case.delays is not None:
        assert providers.delays == list(case.delays)
    else:
        assert len(providers.delays) == case.retries
        for n, delay in enumerate(providers.delays):  # full jitter under the capped ceiling
            assert 0 <= delay <= min(providers.policy.max_delay, 0.4 * 2**n)

    # What the client saw.
    reply_ids = {f["message_id"] for f in frames if f["type"] == "reply"}
    assert len(reply_ids) == 1
    (reply_id,) = reply_ids
    deltas = [f for f in frames if f["type"] == "delta" and f["message_id"] == reply_id]
    streamed = "".join(d["text"] for d in deltas)
    assert [d["seq"] for d in deltas] == list(range(1, len(deltas) + 1))
    last = frames[-1]
    assert last["message_id"] == reply_id

    # What was stored.
    rows = await rows_async(conversation)
    assert [r["role"] for r in rows] == ["user", "assistant"]
    reply = rows[1]
    assert reply["pk"] == reply_id and reply["answers_id"] == rows[0]["pk"]
    assert reply["status"] == case.status

    if case.status == "complete":
        assert last["type"] == "done" and last["status"] == "complete"
        assert reply["content"] == streamed == OK_TEXT  # never an empty success
        assert reply["error_code"] == ""
        return
    # A clear error, never a "done": the code, a human message, the partial text kept.
    assert last["type"] == "error", frames
    assert last["status"] == case.status and last["code"] == case.code
    assert reply["error_code"] == case.code
    assert last["message"] and reply["error_message"] == last["message"]
    assert last["partial"] is bool(case.content)
    assert reply["content"] == streamed == case.content
    if case.content:
        assert "kept" in last["message"]
    else:
        assert "again" in last["message"] and last["retryable"] is True
    assert not any(f["type"] == "done" for f in frames)
