"""The built-in provider used when no model is configured. Not a language model.

It streams a deterministic reply that says so plainly, echoes the start of the user's message
and reports what the context held (from the request's :class:`ContextReport`, or, without
one, from the request itself), so the whole pipeline (assembly, streaming, usage accounting)
can be used and tested with no key and no network.

A summarisation request (one that carries a :class:`SummaryTask`) is answered with what the
summarizer asks for: an extractive summary of the conversation as a JSON object, made of the
messages' own sentences, with no description of the context around it.

Its usage is what the model it is priced like would report: given the conversation's
simulated prompt cache (a :class:`~.prompt_cache.PromptCache` passed in, kept by the caller
between turns), the prompt's tokens are split into cache reads, cache writes and uncached
input as that model's cache would bill them (:mod:`.cache_simulation`). Like a real stream,
the prompt's usage comes first, before the text, so a reply stopped midway still shows
what its prompt was billed.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from itertools import pairwise
from typing import Any

from chatplatform.core.context.formatting import unframe_content
from chatplatform.core.tokens.base import TokenCounter
from chatplatform.core.tokens.bpe import BpeCounter

from .base import (
    ChatRequest,
    Done,
    Provider,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolResultPart,
    Usage,
    message_text,
)
from .cache_simulation import simulated_prompt_usage
from .context_report import ContextReport, ContextSection, PromptSummary, exclusion_label
from .offline_facts import stated_facts
from .offline_tools import client_calls, client_result_lines, tool_results
from .prompt_cache import PromptCache
from .summary_request import extractive_summary
from .tools import SAVE_USER_FACT

OFFLINE_LABEL = "[offline provider]"
ECHO_CHARS = 80
MAX_LISTED = 5
PREVIEW_CHARS = 60
_WORD = re.compile(r"\S+\s*|\s+")
#: The ids of the offline provider's own fact calls.
FACT_CALL_PREFIX = "offline_fact_"


class OfflineProvider(Provider):
    """Deterministic word-by-word reply; ``delay`` seconds between words (0 in tests).

    Usage is computed with ``counter`` (input: system plus messages with per-message overhead;
    output: the reply); the input is the request's ``context_report.prompt_tokens`` when the
    platform counted the prompt with the same counter. With ``prompt_cache`` (the
    conversation's simulated cache, updated in place) the input is split into cache reads
    and writes as the priced model's cache would bill this request at ``clock()`` (seconds);
    without it, all of it is uncached. Never fails.

    Offered ``save_user_fact``, it calls it, as a model would, for each fact the user's new
    message plainly states (:mod:`.offline_facts`), and replies once the results come back,
    saying what was remembered.
    """

    name = "offline"
    offline = True

    def __init__(
        self,
        counter: TokenCounter | None = None,
        *,
        delay: float = 0.0,
        prompt_cache: PromptCache | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if counter is None:
            counter = BpeCounter("o200k_base")
        self.counter = counter
        self.delay = delay
        self.prompt_cache = prompt_cache
        self.clock = clock

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        calls = fact_calls(request) or client_calls(request)
        if calls:
            prompt = self.prompt_usage(request)
            yield prompt
            for call in calls:
                yield call
            asked = json.dumps([call.input for call in calls], ensure_ascii=False)
            usage = replace(prompt, output_tokens=self.counter.count(asked))
            yield usage
            yield Done("tool_use", usage)
            return
        reply = _reply_after_tools(request, self.counter)
        # The prompt is billed once the reply starts, whatever becomes of the reply.
        prompt = self.prompt_usage(request)
        yield prompt
        for word in _WORD.findall(reply):
            if self.delay:
                await asyncio.sleep(self.delay)
            # Without a delay the words come at once, like a reply that is already complete:
            # yielding to the event loop per word would make a busy server's loop the pace.
            yield TextDelta(word)
        usage = replace(prompt, output_tokens=self.counter.count(reply))
        yield usage
        yield Done("end_turn", usage)

    def prompt_usage(self, request: ChatRequest) -> Usage:
        """The prompt's tokens as the priced model would bill them (no output yet)."""
        total = self.input_tokens(request)
        if self.prompt_cache is None or request.summary_task is not None:
            return Usage(input_tokens=total)
        return simulated_prompt_usage(
            request, self.prompt_cache, self.clock(), self.counter.count, total
        )

    def input_tokens(self, request: ChatRequest) -> int:
        report = request.context_report
        if report is not None and report.prompt_tokens is not None:
            if report.counter == self.counter.name:
                # The platform counted this very prompt with this tokenizer while packing it.
                return report.prompt_tokens
        system = sum(self.counter.count(block) for block in request.system_blocks())
        history = sum(self.counter.count_message(m.role, message_text(m)) for m in request.messages)
        return system + history


def build_client(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 60.0,
    counter: TokenCounter | None = None,
    prompt_cache: PromptCache | None = None,
    **options: Any,
) -> OfflineProvider:
    """An :class:`OfflineProvider`, the client factory of its registry entry
    (:mod:`.providers`): no key, no endpoint, no timeout."""
    return OfflineProvider(counter, prompt_cache=prompt_cache, **options)


def fact_calls(request: ChatRequest) -> list[ToolCall]:
    """The ``save_user_fact`` calls answering ``request``: one per fact its new user message
    plainly states, when the tool is offered and the message is not a tool round's results."""
    offered = any(tool.name == SAVE_USER_FACT.name for tool in request.tools)
    if not offered or request.tool_choice != "auto" or request.summary_task is not None:
        return []
    last = request.messages[-1] if request.messages else None
    if last is None or last.role != "user" or tool_results(last.content):
        return []
    return [
        ToolCall(f"{FACT_CALL_PREFIX}{i}", SAVE_USER_FACT.name, fact.tool_input())
        for i, fact in enumerate(stated_facts(message_text(last)), start=1)
    ]


def _reply_after_tools(request: ChatRequest, counter: TokenCounter) -> str:
    """The reply; after a round of fact tools, the reply to the message before the round, with
    what was remembered (or could not be) at the end."""
    messages = list(request.messages)
    results: list[ToolResultPart] = []
    while messages and messages[-1].role == "user" and tool_results(messages[-1].content):
        results = tool_results(messages.pop().content) + results
        if messages and messages[-1].role == "assistant":
            messages.pop()  # the round's tool calls
    if not results:
        return render_reply(request, counter)
    reply = render_reply(replace(request, messages=tuple(messages)), counter)
    return reply + "\n\n" + "\n".join(_saved_lines(results))


def _saved_lines(results: list[ToolResultPart]) -> list[str]:
    client = [r for r in results if not r.tool_use_id.startswith(FACT_CALL_PREFIX)]
    lines = client_result_lines(client)
    for result in results:
        if result in client:
            continue
        try:
            data = json.loads(result.content)
        except ValueError:
            data = {}
        fact = data.get("fact") if isinstance(data, dict) else None
        text = fact.get("text") if isinstance(fact, dict) else None
        if not result.is_error and isinstance(text, str):
            lines.append(f"Remembered: {text}")
        else:
            lines.append("Could not remember a fact you stated; it was not saved.")
    return lines


def render_reply(request: ChatRequest, counter: TokenCounter) -> str:
    """The full reply text; a pure function of the request and the counter."""
    if request.summary_task is not None:
        return extractive_summary(request.summary_task, counter)
    lines = [
        f"{OFFLINE_LABEL} No language model is configured, so this reply comes from the "
        "built-in offline provider, not from a model."
    ]
    last_user = next((m for m in reversed(request.messages) if m.role == "user"), None)
    if last_user is not None and (
        said := " ".join(unframe_content(_untagged(message_text(last_user))).split())
    ):
        echo = said if len(said) <= ECHO_CHARS else said[:ECHO_CHARS].rstrip() + "…"
        lines.append(f'You wrote: "{echo}"')
    report = request.context_report or _report_from_request(request, counter)
    lines.extend(_describe(report))
    return _as_markdown(lines)


#: An element tag the platform frames prompt data in (``<turn_values>``, ``</user_facts>``).
_FRAME_TAG = re.compile(r"<\s*/?\s*[A-Za-z_]+\s*>")


def _untagged(text: str) -> str:
    """The user's text with the prompt's framing tags left out: a reply never shows them."""
    return _FRAME_TAG.sub(" ", text)


def _as_markdown(lines: list[str]) -> str:
    """One line each, with a blank line where a list ends, so that the chat's Markdown shows
    the line after a list as a line of its own rather than as part of the list's last item."""
    text = lines[0] if lines else ""
    for before, line in pairwise(lines):
        ends_list = before.startswith("- ") and not line.startswith("- ")
        text += ("\n\n" if ends_list else "\n") + line
    return text


def _describe(report: ContextReport) -> list[str]:
    """The report in words: the sections with their tokens, then what each held (messages by
    their ``#seq`` in the conversation) and what was left out and why, as the meter says."""
    counted_with = f" (counted with {report.counter})" if report.counter else ""
    budget = f" of a {report.budget_tokens}-token budget" if report.budget_tokens else ""
    strategy = f", strategy {report.strategy}" if report.strategy else ""
    lines = [
        f"Context I was given: {report.total_tokens} tokens{budget} in "
        f"{len(report.sections)} sections{counted_with}{strategy}:"
    ]
    for section in report.sections:
        extra = f", {_count(section.items, 'item')}" if section.items else ""
        dropped = f", {section.dropped} left out" if section.dropped else ""
        name = section.name.replace("_", " ")
        lines.append(f"- {name}: {section.tokens} tokens{extra}{dropped}")
    history = report.section("history")
    if report.history is not None and history is not None:
        first, last = report.history
        span = f"#{first}" if first == last else f"#{first} to #{last}"
        lines.append(
            f"Recent messages I saw word for word: {_count(history.items, 'message')}, {span}."
        )
    elif history is not None:
        lines.append(f"Recent messages I saw word for word: {_count(history.items, 'message')}.")
    if report.summaries:
        lines.append(f"Summaries I saw ({len(report.summaries)}):")
        lines.extend(f"- {_summary(s)}" for s in report.summaries[:MAX_LISTED])
    if report.facts:
        lines.append(f"Facts about you I saw ({len(report.facts)}):")
        lines.extend(f"- {_preview(fact)}" for fact in report.facts[:MAX_LISTED])
    else:
        lines.append("Facts about you I saw: none.")
    retrieval = report.section("retrieval")
    recalled = retrieval.items if retrieval is not None else len(report.retrieved)
    if recalled:
        lines.append(f"Earlier messages recalled as relevant ({recalled}):")
        lines.extend(
            f'- #{m.seq} {m.speaker}: "{_preview(m.excerpt)}"'
            for m in report.retrieved[:MAX_LISTED]
        )
    else:
        lines.append("Earlier messages recalled as relevant: none.")
    if report.left_out:
        total = sum(row.count for row in report.left_out)
        lines.append(f"Left out ({total}):")
        lines.extend(
            f"- {_count(row.count, KIND_WORDS.get(row.kind, row.kind))}: "
            f"{exclusion_label(row.reason)}"
            for row in report.left_out
        )
    return lines


#: How the report names one item of each kind (see ``ContextReport.left_out``).
KIND_WORDS = {
    "message": "history message",
    "retrieved": "retrieved message",
    "fact": "fact",
    "summary": "summary",
}


def _count(n: int, noun: str) -> str:
    plural = "summaries" if noun == "summary" else f"{noun}s"
    return f"{n} {noun if n == 1 else plural}"


#: How the report names each kind of summary.
SUMMARY_WORDS = {
    "rolling": "rolling summary",
    "recent": "summary of the last 7 days",
    "long": "summary of the last 30 days",
    "carried": "summary carried over from an earlier conversation",
}


def _summary(summary: PromptSummary) -> str:
    kind = SUMMARY_WORDS.get(summary.kind, f"{summary.kind} summary")
    span = (
        f"message #{summary.first_seq}"
        if summary.first_seq == summary.last_seq
        else f"messages #{summary.first_seq} to #{summary.last_seq}"
    )
    return f"{kind}, covering {span}"


def _report_from_request(request: ChatRequest, counter: TokenCounter) -> ContextReport:
    sections = []
    if blocks := request.system_blocks():
        tokens = sum(counter.count(block) for block in blocks)
        sections.append(ContextSection("system", tokens, items=len(blocks)))
    if request.messages:
        tokens = sum(counter.count_message(m.role, message_text(m)) for m in request.messages)
        sections.append(ContextSection("history", tokens, items=len(request.messages)))
    return ContextReport(sections=tuple(sections), counter=counter.name)


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS].rstrip() + "…"
