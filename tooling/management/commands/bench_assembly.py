"""Time context assembly on conversations of N messages against naive and raw-fetch floors."""

from __future__ import annotations

import gc
import json
import os
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from chatplatform.core.context.types import MessageItem
from chatplatform.counting import storage_counter_for
from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.assembly.service import assemble_context
from chats.retrieval import embeddings
from chats.retrieval.dense import dense_scores
from chats.retrieval.rerank import DENSE_TOP_K
from tooling.benchmarks.dense_vectors import build_index, plant_vectors
from tooling.benchmarks.scratch_data import bench_tenant, bench_user, conversation_with

#: The new message of every timed assembly.
QUESTION = "What did we decide about the release and the budget?"


def p(values: list[float], q: float) -> float | None:
    """The ``q`` quantile of ``values`` (nearest rank), ``None`` when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return round(ordered[index], 3)


class Command(BaseCommand):
    help = "Benchmark context assembly (p50/p95) against a naive walk and a raw fetch."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--sizes", default="1000,1000000")
        parser.add_argument("--budget", type=int, default=140_000)
        # Enough runs that the 95th percentile is not decided by two or three outliers.
        parser.add_argument("--runs", type=int, default=400)
        # 0 skips the naive walk (a minute per run at 1M messages) while iterating.
        parser.add_argument("--naive-runs", type=int, default=5)
        parser.add_argument("--strategy", default="sliding_window")
        parser.add_argument("--json", action="store_true")
        # Retrieval by meaning on (hybrid): every message gets a synthetic vector, one early
        # message a near-duplicate of the question's (tooling/benchmarks/dense_vectors.py).
        parser.add_argument("--dense", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        sizes = [int(s) for s in options["sizes"].split(",") if s.strip()]
        budget = options["budget"]
        tenant = bench_tenant()
        user = bench_user(tenant)
        dense = options["dense"]
        if dense and not embeddings.available():
            raise CommandError("--dense needs the embeddings requirements")
        policy = self._policy(tenant, budget, options["strategy"], dense=dense)
        counter = storage_counter_for(policy.model_profile)
        results = []
        for size in sizes:
            conversation = conversation_with(tenant, user, size, counter)
            planted: dict[str, Any] = {}
            if dense:
                planted = plant_vectors(conversation, QUESTION)
                planted["index"] = build_index(conversation)
            results.append(
                self._measure(
                    conversation, policy, user, options["runs"], options["naive_runs"], planted
                )
            )
        report = {
            "database": connection.vendor,
            "budget": budget,
            # The machine's load (1, 5 and 15 minutes) when the runs ended: latency on shared
            # cores is only comparable at a like load.
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "sizes": results,
        }
        if options["json"]:
            self.stdout.write(json.dumps(report))
        else:
            self.stdout.write(json.dumps(report, indent=2))

    def _policy(
        self, tenant: Any, budget: int, strategy: str, *, dense: bool = False
    ) -> ContextPolicy:
        with all_tenants():
            profile = ModelProfile.objects.get(tenant__isnull=True, name="Offline (built in)")
        reserve = 4096
        with tenant_scope(tenant):
            policy, _ = ContextPolicy.objects.update_or_create(
                tenant=tenant,
                name=f"bench {strategy} {budget}{' dense' if dense else ''}",
                defaults=dict(
                    model_profile=profile,
                    strategy=strategy,
                    max_context_tokens=min(budget + reserve, profile.context_window),
                    reserved_response_tokens=reserve,
                    system_budget=2000,
                    facts_budget=1000,
                    summaries_budget=4000,
                    retrieval_budget=6000,
                    recent_message_cap=500,
                    min_recent_messages=20,
                    retrieval_dense=dense,
                ),
            )
            return ContextPolicy.objects.select_related("model_profile").get(pk=policy.pk)

    def _measure(
        self,
        conversation: Conversation,
        policy: ContextPolicy,
        user: Any,
        runs: int,
        naive: int,
        planted: dict[str, Any],
    ) -> dict[str, Any]:
        """Assembly and raw fetch alternate, run by run, so both see the same load (other
        processes share the CPU) and the same warm caches.

        The assembly is called as the reply pipeline calls it (``turn_prepare``): with a
        conversation it has just read (``conversation_is_fresh``), the policy resolved.
        """
        item = MessageItem(
            id="bench",
            seq=conversation.last_seq + 1,
            role="user",
            content=QUESTION,
        )

        def assemble() -> Any:
            return assemble_context(
                conversation, item, author=user, policy=policy, conversation_is_fresh=True
            )

        turn = None
        for _ in range(3):  # warm-up
            turn = assemble()
        assert turn is not None
        # As the ASGI process does after start-up (config/asgi.py): what is loaded by now
        # lives as long as the process, and full collections stop rescanning it. The naive
        # walk, which allocates a whole conversation, is timed after this and pays no less.
        gc.collect()
        gc.freeze()
        chosen = [i.id for i in turn.prompt.included if i.kind == "message"]
        seqs = self._seqs(conversation, chosen)
        timings: list[float] = []
        raw: list[float] = []
        for _ in range(runs):
            started = time.perf_counter()
            turn = assemble()
            timings.append((time.perf_counter() - started) * 1000)
            raw.append(self._raw_fetch(conversation, seqs, len(chosen)))
        naive_times = [self._naive(conversation, policy) for _ in range(naive)]
        dense: dict[str, Any] = {}
        if planted:
            retrieved = {i.id for i in turn.prompt.included if i.kind == "retrieved"}
            alone, near = self._dense_alone(conversation, item.seq, runs)
            dense = {
                "dense_retrieval": turn.dense,
                "dense_index": planted["index"],
                # Retrieval by meaning alone (the question's embedding, the index or the
                # exact scan, the vectors read), within the assembly timed above.
                "dense_p50_ms": p(alone, 0.5),
                "dense_p95_ms": p(alone, 0.95),
                "planted_seq": planted["planted_seq"],
                "planted_dense_rank": (
                    sorted(near, key=near.__getitem__, reverse=True).index(planted["planted_seq"])
                    + 1
                    if planted["planted_seq"] in near
                    else None
                ),
                "planted_found": planted["planted_id"] in retrieved,
                "vectors_note": "synthetic random unit vectors; the planted one is a "
                "near-duplicate of the question's real embedding",
            }
        return {
            "messages": conversation.message_count,
            "p50_ms": p(timings, 0.5),
            "p95_ms": p(timings, 0.95),
            "naive_p95_ms": p(naive_times, 0.95),
            "raw_fetch_p95_ms": p(raw, 0.95),
            "raw_fetch_p50_ms": p(raw, 0.5),
            "prompt_tokens": turn.prompt.prompt_tokens,
            **dense,
        }

    def _dense_alone(
        self, conversation: Conversation, before_seq: int, runs: int
    ) -> tuple[list[float], dict[int, float]]:
        timings: list[float] = []
        near: dict[int, float] = {}
        for _ in range(runs):
            started = time.perf_counter()
            near = (
                dense_scores(conversation, QUESTION, before_seq=before_seq, top_k=DENSE_TOP_K) or {}
            )
            timings.append((time.perf_counter() - started) * 1000)
        return timings, near

    def _seqs(self, conversation: Conversation, ids: list[Any]) -> tuple[int, int]:
        with tenant_scope(conversation.tenant_id):
            rows = list(
                Message.objects.filter(conversation_id=conversation.pk, pk__in=ids).values_list(
                    "seq", flat=True
                )
            )
        return (min(rows), max(rows)) if rows else (0, -1)

    def _raw_fetch(self, conversation: Conversation, seqs: tuple[int, int], expected: int) -> float:
        """The floor: one SQL query returning the rows the assembly chose (history is a gap-free
        run of the newest messages, so a seq range), with the columns the assembly reads,
        through the same Django cursor."""
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, seq, role, content, token_count, token_counter, author_id, "
                "reply_to_id FROM chats_message WHERE tenant_id = %s AND conversation_id = %s "
                "AND seq BETWEEN %s AND %s ORDER BY seq DESC",
                [conversation.tenant_id, conversation.pk, seqs[0], seqs[1]],
            )
            rows = cursor.fetchall()
        elapsed = (time.perf_counter() - started) * 1000
        assert len(rows) == expected, "the raw fetch must return exactly the chosen rows"
        return elapsed

    def _naive(self, conversation: Conversation, policy: ContextPolicy) -> float:
        """The naive way: load the whole conversation, walk it newest to oldest in Python."""
        started = time.perf_counter()
        with tenant_scope(conversation.tenant_id):
            messages = list(Message.objects.filter(conversation_id=conversation.pk).order_by("seq"))
        budget = policy.max_context_tokens - policy.reserved_response_tokens
        taken: list[Message] = []
        used = 0
        for index, message in enumerate(reversed(messages)):
            tokens = message.token_count or len(message.content) // 4
            if index >= policy.min_recent_messages and used + tokens > budget:
                break
            taken.append(message)
            used += tokens
        taken.reverse()
        return (time.perf_counter() - started) * 1000
