"""The recall evaluation through the real pipeline (``manage.py eval_recall``), on LoCoMo's
or BEAM's conversations (the format told from the file, :mod:`tooling.evaluation.datasets`).

Each sample is loaded into a scratch tenant: its speakers become users (username = the
speaker's name, so labels stay short), the conversation a group chat (BEAM: the user's own
chat, the assistant's messages stored as the platform's replies), each turn a message
stored with :func:`~chats.services.message_create` (counted with ``o200k_base``, indexed for
search by the database) and dated with its session's date-time. Every scored question
(LoCoMo: categories 1-4; BEAM: every ability's questions that name evidence) is then
assembled as the new message after the last session by the assembly service
(:func:`~chats.assembly.service.assemble_context`) with the production retriever. Hybrid
searches by meaning too when the embeddings are installed (``EvalOptions.dense``, the policy's
``retrieval_dense``): every loaded turn is embedded first, through the same service as the
background jobs (:func:`~chats.retrieval.dense.embed_conversation`). With
``EvalOptions.summaries`` every loaded conversation gets its rolling summaries first, through
the service the background job runs (:func:`~summaries.services.summary_refresh`, with the
policy's summarizer: the offline extractive one here, deterministic), until none is pending;
the policy gives them a share of the budget (:func:`~tooling.evaluation.locomo.eval_policy_fields`).
BEAM's results add, per ability, ``span_covered_percent``: the questions whose every evidence
message is in the prompt verbatim or inside the range of a summary the prompt shows (its
current summaries, and older ones retrieval brought), which is what a question about the whole
conversation (summarisation) can ask of a bounded prompt. Questions are never stored, and
everything the run creates is rolled back at the end.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from django.contrib.auth import get_user_model
from django.db import transaction

from chatplatform.core.context.strategies import strategy_for, strategy_names
from chatplatform.core.context.types import DEFAULT_REPLY_EXCERPT_TOKENS, MessageItem, RetrievedItem
from chatplatform.models import ContextPolicy, ModelProfile, Tenant
from chatplatform.models.conversations import Conversation, Message, MessageRole
from chatplatform.services import membership_add, tenant_create
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly.service import Retriever, TurnContext, assemble_context
from chats.retrieval import embeddings
from chats.retrieval.dense import DenseRetrieval, dense_enabled, dense_status, embed_conversation
from chats.retrieval.retriever import SUMMARY_ID_PREFIX, RetrievalSettings, retrieve_ranked
from chats.services import conversation_create, message_create
from memory.services import instructions_capture
from summaries.models import Summary
from summaries.services import summary_refresh
from tooling.evaluation import beam, datasets, locomo

STRATEGIES = strategy_names(lambda s: s.in_recall_eval)


class _Rollback(Exception):
    """Raised to roll the scratch data back once results are computed."""


@dataclass
class EvalOptions:
    budget: int = 4000
    strategy: str = "hybrid"
    recent: int = 4
    history_reserve: int = 400
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    #: Retrieve among all older messages (``True``) or only those older than the recent
    #: window the assembly service fetched (``False``: the service's ``before_seq``).
    retrieve_whole_history: bool = True
    #: Hybrid: also retrieve by meaning (when the embeddings are installed).
    dense: bool = True
    #: Keep the standing instructions and preferences the users' messages state, as the
    #: platform does on intake, and give them their section of the prompt.
    instructions: bool = True
    #: Hybrid: the head a reply recalled for its exchange is cut to (0: replies go whole).
    reply_excerpt_tokens: int = DEFAULT_REPLY_EXCERPT_TOKENS
    #: Ask each question while the cache is warm (:func:`warm_window`): the window a turn a
    #: minute earlier started stands, so the question's own finds are the per-turn ones.
    warm: bool = False
    #: Hybrid: the policy's ``turn_retrieval_percent`` (``None``: the field's default).
    turn_retrieval_percent: int | None = None
    #: Build every loaded conversation's rolling summaries before the questions, and give
    #: them their share of the budget.
    summaries: bool = False


@dataclass
class _Loaded:
    sample: locomo.Sample
    conversation: Conversation
    policy: ContextPolicy
    text_of: dict[str, str]
    seq_of: dict[str, int]
    asked_at: datetime
    #: Who asks the questions: the conversation's first speaker (BEAM's user), whose own
    #: memories a turn of theirs holds.
    asker: Any


def run_eval(
    path: str | Path,
    options: EvalOptions,
    *,
    dump: IO[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the evaluation on the LoCoMo-format file at ``path``; return the JSON result.

    Everything is created inside one transaction that is rolled back afterwards."""
    if options.strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {options.strategy!r}: pick one of {STRATEGIES}")
    kind, samples = datasets.load_samples(path)
    result: dict[str, Any] = {}
    try:
        with transaction.atomic():
            result = _run(kind, samples, options, dump, progress)
            raise _Rollback
    except _Rollback:
        pass
    return result


def _run(
    kind: str,
    samples: list[locomo.Sample],
    options: EvalOptions,
    dump: IO[str] | None,
    progress: Callable[[str], None] | None,
) -> dict[str, Any]:
    tenant = tenant_create(name="LoCoMo recall evaluation (scratch)", slug=scratch_slug())
    policy = _policy(tenant, options)
    groups: Iterable[int | str] = beam.ABILITIES if kind == datasets.BEAM else locomo.CATEGORIES
    tallies = {c: locomo.Tally() for c in groups}
    prompt_tokens: list[int] = []
    history_tokens: list[int] = []
    embed_ms = summary_ms = 0.0
    summaries_built = 0
    for index, sample in enumerate(samples):
        loaded = _load(tenant, policy, sample, index)
        if progress:
            progress(f"{sample.sample_id}: {len(sample.turns())} turns loaded")
        if dense_status(policy) == DenseRetrieval.ON:
            started = time.perf_counter()
            embedded = _embed_all(loaded.conversation)
            embed_ms += (time.perf_counter() - started) * 1000
            if progress:
                progress(f"{sample.sample_id}: {embedded} turns embedded")
        if options.summaries:
            started = time.perf_counter()
            built = summarise_all(loaded.conversation)
            summary_ms += (time.perf_counter() - started) * 1000
            summaries_built += built
            if progress:
                progress(f"{sample.sample_id}: {built} summaries written")
        retriever = _retriever(options)
        state = loaded.conversation
        if options.warm:
            state = warm_window(loaded, retriever)
        for question in sample.questions:
            if question.category not in tallies:
                continue
            evidence = [loaded.text_of[e] for e in question.evidence if e in loaded.text_of]
            if not evidence:
                continue
            item = MessageItem(
                id=f"question-{index}-{len(prompt_tokens)}",
                seq=loaded.conversation.last_seq + 1,
                role="user",
                content=question.question,
                created_at=loaded.asked_at,
            )
            turn = assemble_context(
                state,
                item,
                policy=policy,
                retriever=retriever,
                now=loaded.asked_at,
                author=loaded.asker,
                conversation_is_fresh=options.warm,
            )
            text = locomo.prompt_text(turn.prompt.system, turn.prompt.messages)
            found = locomo.evidence_present(text, evidence, question.quote)
            covered = None
            if kind == datasets.BEAM:
                seqs = [loaded.seq_of.get(e) for e in question.evidence if e in loaded.text_of]
                covered = locomo.span_covered(found, seqs, shown_summary_ranges(turn, tenant.pk))
            present = dict(
                zip((e for e in question.evidence if e in loaded.text_of), found, strict=True)
            )
            tallies[question.category].add(found, covered, question.latest_found(present))
            prompt_tokens.append(turn.prompt.prompt_tokens)
            history_tokens.append(turn.hypothetical_tokens)
            if dump is not None:
                line = {
                    "sample_id": sample.sample_id,
                    "question": question.question,
                    "category": question.category,
                    "context": text,
                }
                dump.write(json.dumps(line, ensure_ascii=False) + "\n")
    n = max(1, len(prompt_tokens))
    return {
        "strategy": options.strategy,
        "budget": options.budget,
        "warm": options.warm,
        "turn_retrieval_percent": policy.turn_retrieval_percent,
        "questions": len(prompt_tokens),
        **_by_category(kind, tallies),
        "mean_prompt_tokens": round(sum(prompt_tokens) / n, 1),
        "mean_history_tokens": round(sum(history_tokens) / n, 1),
        "dense_retrieval": dense_status(policy),
        "embedding_model": embeddings.MODEL_NAME
        if dense_status(policy) == DenseRetrieval.ON
        else "",
        "embedding_ms": round(embed_ms, 1),
        "summaries": options.summaries,
        "summaries_written": summaries_built,
        "summary_ms": round(summary_ms, 1),
    }


def summarise_all(conversation: Conversation) -> int:
    """Write a loaded conversation's rolling summaries (and their merges) through the
    background job's service, run after run until nothing is pending; how many it wrote."""
    written = 0
    while True:
        result = summary_refresh(conversation.tenant_id, conversation.pk)
        written += len(result.created) + len(result.merged)
        if not result.more:
            return written


def shown_summary_ranges(turn: TurnContext, tenant_id: int) -> list[tuple[int, int]]:
    """The ``first_seq..last_seq`` of every summary an assembled turn's prompt shows: those
    of its summaries section, and older ones retrieval brought (ids ``summary:<pk>``)."""
    shown = set(turn.prompt.summary_ids)
    ranges = [(s.first_seq, s.last_seq) for s in turn.summaries if s.id in shown]
    recalled = [
        int(str(i.id).removeprefix(SUMMARY_ID_PREFIX))
        for i in turn.prompt.included
        if i.kind == "retrieved" and str(i.id).startswith(SUMMARY_ID_PREFIX)
    ]
    if recalled:
        with tenant_scope(tenant_id):
            ranges += list(
                Summary.objects.filter(pk__in=recalled).values_list("first_seq", "last_seq")
            )
    return ranges


#: How long before the question the turn that started the warm window came.
WARM_GAP = timedelta(minutes=1)


def warm_window(loaded: _Loaded, retriever: Retriever) -> Conversation:
    """The conversation as a warm cache leaves it: a copy whose stored window is the one the
    newest user message's turn started (assembled as if sent :data:`WARM_GAP` before the
    question, after the pause that ends the dataset, so it started a new window with its own
    recalled finds). A question asked on it keeps that window, as a turn within the cache's
    lifetime does: its evidence must come from the window, what it recalled for the earlier
    message, or the question's own per-turn finds."""
    conversation = loaded.conversation
    with tenant_scope(conversation.tenant_id):
        last = (
            Message.objects.filter(conversation=conversation, role=MessageRole.USER)
            .select_related("author")
            .order_by("-seq")
            .first()
        )
    state = copy.copy(conversation)
    if last is None:
        return state
    sent_at = loaded.asked_at - WARM_GAP
    item = MessageItem(
        id=last.pk,
        seq=last.seq,
        role="user",
        content=last.content,
        tokens=last.token_count,
        counted_by=last.token_counter or None,
        created_at=sent_at,
    )
    turn = assemble_context(
        conversation,
        item,
        author=last.author,
        policy=loaded.policy,
        retriever=retriever,
        now=sent_at,
    )
    state.window_start_seq = turn.prompt.window_start_seq
    state.window_recalled_ids = list(turn.prompt.recalled_ids)
    state.window_excerpt_ids = list(turn.prompt.recalled_excerpt_ids)
    state.window_summary_ids = list(turn.prompt.summary_ids)
    state.window_sent_at = sent_at
    return state


def _by_category(kind: str, tallies: dict[Any, locomo.Tally]) -> dict[str, Any]:
    """LoCoMo: ``categories`` by number. BEAM: ``abilities`` by name (those with scored
    questions) and ``core_percent``, the mean all-evidence percentage of the core abilities."""
    if kind != datasets.BEAM:
        return {"categories": {str(c): t.as_dict() for c, t in tallies.items()}}
    abilities = {name: t.as_dict() for name, t in tallies.items() if t.questions}
    core = [abilities[a]["all_evidence_percent"] for a in beam.CORE_ABILITIES if a in abilities]
    return {
        "dataset": kind,
        "abilities": abilities,
        "core_percent": round(sum(core) / len(core), 2) if core else 0.0,
    }


def _embed_all(conversation: Conversation) -> int:
    """Embed every turn of a loaded conversation (the background job's service, in a loop)."""
    total = 0
    while True:
        result = embed_conversation(conversation.tenant_id, conversation.pk, check_policy=False)
        total += result.embedded
        if not result.more:
            return total


def _retriever(options: EvalOptions) -> Retriever:
    """The production retrieval (messages, then summaries not already shown, one ranking)
    with the evaluation's settings."""

    def retriever(
        conversation: Conversation,
        new: MessageItem,
        policy: ContextPolicy,
        before_seq: int,
        shown_summaries: Iterable[int],
    ) -> list[RetrievedItem]:
        max_items = min(options.retrieval.max_items, policy.retrieval_max_items)
        return retrieve_ranked(
            conversation,
            new.content,
            before_seq=new.seq if options.retrieve_whole_history else before_seq,
            settings=replace(options.retrieval, max_items=max_items, dense=dense_enabled(policy)),
            shown_summaries=shown_summaries,
            bot_name=policy.bot_name,
        )

    return retriever


def scratch_slug(base: str = "locomo-eval") -> str:
    """A tenant slug no tenant has yet, for a scratch tenant."""
    slug, n = base, 1
    while Tenant.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


def _policy(tenant: Tenant, options: EvalOptions) -> ContextPolicy:
    fields = locomo.eval_policy_fields(
        options.strategy,
        options.budget,
        recent=options.recent,
        history_reserve=options.history_reserve,
        retrieval_max_items=options.retrieval.max_items,
        instructions=options.instructions,
        reply_excerpt_tokens=options.reply_excerpt_tokens,
        summaries=options.summaries,
    )
    return scratch_policy(
        tenant,
        fields,
        name=f"LoCoMo evaluation ({options.strategy}, {options.budget})",
        profile={
            "name": "LoCoMo evaluation model (o200k_base)",
            "provider": "offline",
            "model": "offline",
        },
        retrieval_dense=options.dense and strategy_for(options.strategy).needs.retrieval_by_meaning,
        instructions_enabled=options.instructions,
        **(
            {}
            if options.turn_retrieval_percent is None
            else {"turn_retrieval_percent": options.turn_retrieval_percent}
        ),
    )


def scratch_policy(
    tenant: Tenant,
    fields: dict[str, Any],
    *,
    name: str,
    profile: dict[str, Any],
    **settings: Any,
) -> ContextPolicy:
    """The active policy of a scratch tenant for a LoCoMo run: ``fields`` from
    :func:`~tooling.evaluation.locomo.eval_policy_fields`, ``settings`` on top, on a new model
    profile counted with ``o200k_base`` (``profile``: its name, provider, model, prices)."""
    with tenant_scope(tenant):
        model = ModelProfile.objects.create(
            tenant=tenant,
            context_window=max(200_000, fields["max_context_tokens"]),
            max_output_tokens=locomo.EVAL_RESERVED_RESPONSE,
            tokenizer="o200k_base",
            **profile,
        )
        policy = ContextPolicy.objects.create(
            tenant=tenant,
            name=name,
            model_profile=model,
            system_prompt_template=locomo.EVAL_SYSTEM_PROMPT,
            facts_enabled=False,
            tools_enabled=False,
            periodic_summaries_enabled=False,
            safety_margin_percent=0.0,
            **settings,
            **fields,
        )
        Tenant.objects.filter(pk=tenant.pk).update(active_policy=policy)
        return ContextPolicy.objects.select_related("model_profile").get(pk=policy.pk)


def speaker_user(name: str) -> Any:
    """A new user for a LoCoMo speaker (username = the name, made unique)."""
    User = get_user_model()
    username = name[:150] or "speaker"
    n = 1
    while User.objects.filter(username=username).exists():
        n += 1
        username = f"{name[:140]}-{n}"
    return User.objects.create_user(username=username, password=None)


def sample_conversation(
    tenant: Tenant, policy: ContextPolicy, sample: locomo.Sample, index: int
) -> tuple[Conversation, dict[str, Any], Any]:
    """A group chat of the sample's speakers (new users) under ``policy``: the conversation,
    the users by speaker name, and the first of them (who stands in for unknown speakers)."""
    users = {name: speaker_user(name) for name in sample.speakers}
    for user in users.values():  # members, as people who chat are (their memories need it)
        membership_add(tenant=tenant, user=user)
    first, *others = list(users.values()) or [tenant.service_user]
    conversation = conversation_create(
        tenant=tenant,
        created_by=first,
        title=f"LoCoMo {sample.sample_id or index}",
        participants=others,
    )
    with tenant_scope(tenant):
        Conversation.objects.filter(pk=conversation.pk).update(policy=policy)
    conversation.policy = policy
    return conversation, users, first


def turn_message(
    conversation: Conversation, turn: locomo.Turn, users: dict[str, Any], first: Any
) -> Message:
    """A loaded turn stored as a message: a BEAM assistant's message as the platform's own
    reply, anyone else's as a user message of its speaker (``first`` for unknown speakers)."""
    if turn.speaker == beam.ASSISTANT and beam.ASSISTANT not in users:
        role, author = MessageRole.ASSISTANT, None
    else:
        role, author = MessageRole.USER, users.get(turn.speaker, first)
    message, _ = message_create(
        conversation=conversation, role=role, content=turn.text, author=author, validate=False
    )
    if role == MessageRole.USER:
        # What intake does once a message is stored (there, after its commit).
        instructions_capture(conversation.tenant_id, message)
    return message


def _load(tenant: Tenant, policy: ContextPolicy, sample: locomo.Sample, index: int) -> _Loaded:
    conversation, users, first = sample_conversation(tenant, policy, sample, index)
    text_of: dict[str, str] = {}
    seq_of: dict[str, int] = {}
    last = datetime(2000, 1, 1, tzinfo=UTC)
    for session in sample.sessions:
        when = session.when.replace(tzinfo=UTC)
        seqs: list[int] = []
        for turn in session.turns:
            if not turn.text.strip():
                continue
            message = turn_message(conversation, turn, users, first)
            seqs.append(message.seq)
            text_of[turn.dia_id] = turn.text
            seq_of[turn.dia_id] = message.seq
        with tenant_scope(tenant):
            Message.objects.filter(conversation=conversation, seq__in=seqs).update(created_at=when)
        last = max(last, when)
    with tenant_scope(tenant):
        conversation = Conversation.objects.select_related("policy").get(pk=conversation.pk)
    return _Loaded(sample, conversation, policy, text_of, seq_of, last + timedelta(days=1), first)
