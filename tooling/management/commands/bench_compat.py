"""Load benchmark of the SDK-compatible API: N clients per protocol, each a real SDK client
(``openai.AsyncOpenAI`` on Chat Completions, ``anthropic.AsyncAnthropic`` on Messages)
streaming its turns in sequence, against a real ASGI server process (uvicorn) on the
configured database and channel layer, with the built-in offline provider (instant: all
measured time is the platform's). The protocols run one after the other, each on its own
clients, so that each one's figures are its own.

A client continues one named conversation (the ``X-Conversation-Id`` header) and sends only
its new message; with ``--unnamed`` it names none and resends its whole history, as an SDK
app that keeps its own history does. The first token's time is measured at the client, from
the request to the first text delta. By default the loop is closed and saturating (each
client sends its next turn when its reply is done); ``--rate`` offers a fixed load instead,
which measures the platform's overhead at that throughput. Afterwards the database is asked
whether every turn sent has its user message and a complete reply stored. CPU per turn is
reported for the server processes, for this process (the SDK clients: the load itself, on
the same machine) and for the whole machine (PostgreSQL, Redis and anything else running
included), and the time this machine takes for a fixed pure-Python workload just before the
run (``machine_reference_ms``, :mod:`tooling.benchmarks.machine_speed`): runs are comparable
only on machines that were equally fast."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import time
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connection

from chatplatform.models.conversations import Message, MessageRole, Status
from chatplatform.tenancy.scoping import tenant_scope
from tooling.benchmarks.asgi_servers import (
    Servers,
    free_port,
    servers_cpu_seconds,
    servers_settled,
    servers_start,
    servers_stop,
)
from tooling.benchmarks.load_runs import (
    LoadClient,
    hot_tables_vacuum,
    load_clients,
    loop_factory,
    machine_cpu_seconds,
    p50_p99,
)
from tooling.benchmarks.machine_speed import reference_loop_ms
from tooling.benchmarks.scratch_data import bench_tenant
from tooling.benchmarks.sdk_streams import SDK_PROTOCOLS, SdkProtocol

#: A turn sent: its client's user id and the text of its user message (unique in the run).
Sent = tuple[int, str]


class Command(BaseCommand):
    help = (
        "Benchmark the SDK-compatible API (OpenAI Chat Completions, Anthropic Messages) with "
        "the real SDKs, streaming, against a real ASGI server."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--clients", type=int, default=50, help="concurrent clients per SDK")
        parser.add_argument("--turns", type=int, default=10, help="turns per client")
        parser.add_argument(
            "--rate",
            type=float,
            default=0.0,
            help="offered load in turns per second over all clients of a protocol: turn k of "
            "client i is sent at (k * clients + i) / rate seconds, or when its previous reply "
            "is done if that is later (0: every client sends its next turn at once, a "
            "saturating loop)",
        )
        parser.add_argument(
            "--unnamed",
            action="store_true",
            help="clients name no conversation and resend their whole history every turn",
        )
        parser.add_argument(
            "--protocol",
            action="append",
            choices=[protocol.name for protocol in SDK_PROTOCOLS],
            metavar="NAME",
            help="run only this protocol (openai, anthropic); given more than once, these in "
            "the order given (default: all, in the order of SDK_PROTOCOLS)",
        )
        parser.add_argument("--workers", type=int, default=2, help="ASGI server processes")
        parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
        parser.add_argument("--json", action="store_true", help="print one line of JSON")
        parser.add_argument(
            "--timeline",
            default="",
            metavar="PATH",
            help="also write each turn to PATH (JSON): its protocol, client, turn index, send "
            "time (s from the protocol's start), first token and whole reply (ms), to see "
            "which turns are slow (a client's first, a moment of the run)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.REDIS_URL and options["workers"] > 1:
            options["workers"] = 1  # the in-memory channel layer does not cross processes
        # The SDKs' HTTP clients log every request at INFO: thousands of lines in a run.
        for name in ("httpx", "httpx2"):
            logging.getLogger(name).setLevel(logging.WARNING)
        count = options["clients"]
        by_name = {protocol.name: protocol for protocol in SDK_PROTOCOLS}
        protocols = [by_name[name] for name in options["protocol"] or by_name]
        clients = load_clients(count * len(protocols))
        hot_tables_vacuum()
        reference = reference_loop_ms()
        port = free_port()
        servers = servers_start(port, options["workers"])
        results: dict[str, dict[str, Any]] = {}
        timeline: list[dict[str, Any]] = []
        try:
            with asyncio.Runner(loop_factory=loop_factory()) as runner:
                for index, protocol in enumerate(protocols):
                    # A protocol run again is reported again, under its name and its count.
                    runs = sum(1 for earlier in protocols[:index] if earlier == protocol)
                    # The servers' background start-up work (and the previous run's tail)
                    # is not this run's: see servers_settled.
                    settled = servers_settled(servers)
                    result = runner.run(
                        self._run(
                            protocol,
                            f"http://127.0.0.1:{port}",
                            clients[index * count : (index + 1) * count],
                            servers,
                            options,
                            timeline,
                        )
                    )
                    result["servers_settled_s"] = round(settled, 1)
                    results[f"{protocol.name}-{runs + 1}" if runs else protocol.name] = result
        finally:
            servers_stop(servers)
        if options["timeline"]:
            Path(options["timeline"]).write_text(json.dumps(timeline))
        report: dict[str, Any] = {
            "clients": count,
            "turns": options["turns"],
            "rate": options["rate"],
            "named": not options["unnamed"],
            "workers": options["workers"],
            "database": connection.vendor,
            "machine_reference_ms": reference,
        }
        for name, result in results.items():
            result["lost"] = self._lost(result.pop("sent"))
            report[name] = result
        self.stdout.write(json.dumps(report) if options["json"] else json.dumps(report, indent=2))

    async def _run(
        self,
        protocol: SdkProtocol,
        server_url: str,
        clients: list[LoadClient],
        servers: Servers,
        options: dict[str, Any],
        timeline: list[dict[str, Any]],
    ) -> dict[str, Any]:
        turns, rate, unnamed = options["turns"], options["rate"], options["unnamed"]
        run = uuid.uuid4().hex[:8]
        first_tokens: list[float] = []
        sent: list[Sent] = []
        errors = 0

        async def client(index: int, load: LoadClient, sdk: Any) -> None:
            nonlocal errors
            headers = {} if unnamed else {"X-Conversation-Id": str(load.conversation_id)}
            history: list[dict[str, str]] = []
            try:
                for turn in range(turns):
                    if rate:
                        slot = started + (turn * len(clients) + index) / rate
                        await asyncio.sleep(max(0.0, slot - time.perf_counter()))
                    content = f"Turn {turn + 1} of client {index} ({run}): hello"
                    message = {"role": "user", "content": content}
                    sent.append((load.user_id, content))
                    sent_at = time.perf_counter()

                    record: dict[str, Any] = {
                        "protocol": protocol.name,
                        "client": index,
                        "turn": turn,
                        "sent_s": round(sent_at - started, 4),
                    }

                    def first_text(
                        sent_at: float = sent_at, record: dict[str, Any] = record
                    ) -> None:
                        first_tokens.append((time.perf_counter() - sent_at) * 1000)
                        record["first_token_ms"] = round(first_tokens[-1], 2)

                    try:
                        reply = await protocol.turn(sdk, [*history, message], headers, first_text)
                    except Exception as exc:
                        errors += 1
                        self.stderr.write(f"{protocol.name} client {index}: {exc!r}")
                        record["error"] = repr(exc)
                        continue
                    finally:
                        record["reply_ms"] = round((time.perf_counter() - sent_at) * 1000, 2)
                        timeline.append(record)
                    if unnamed:
                        history += [message, {"role": "assistant", "content": reply}]
            finally:
                await sdk.close()

        # The SDK clients are made before the clock starts: making one (its HTTP client's TLS
        # context) takes about 20 ms of this process, all 50 a second, and the first made
        # imports the SDK. Made inside the clients' tasks, that second blocked the event loop
        # after the first turns had been sent: their first token was read a second late, and
        # the turns due meanwhile went out in one burst.
        sdks = [protocol.client(server_url, load.key, options["timeout"]) for load in clients]
        # Then this process's objects so far (Django, the SDKs, their clients) leave the
        # collector's generations, as the server's do (config/asgi.py): the first full
        # collection of a run otherwise came in its first 50 ms and stopped the clients'
        # event loop for about 200 ms, late-reading every first token then in flight.
        gc.collect()
        gc.freeze()
        cpu_before, machine_before = servers_cpu_seconds(servers), machine_cpu_seconds()
        clients_before = time.process_time()  # this process: the SDK clients, the load
        started = time.perf_counter()  # also the origin of the clients' schedule
        await asyncio.gather(
            *(
                client(index, load, sdk)
                for index, (load, sdk) in enumerate(zip(clients, sdks, strict=True))
            )
        )
        elapsed = time.perf_counter() - started
        server_cpu = servers_cpu_seconds(servers) - cpu_before
        machine_cpu = machine_cpu_seconds() - machine_before
        clients_cpu = time.process_time() - clients_before
        total = len(first_tokens)
        p50, p99 = p50_p99(first_tokens)
        per_turn = 1000 / total if total else 0.0
        return {
            "turns_total": total,
            "duration_s": round(elapsed, 2),
            "turns_per_s": round(total / elapsed, 1) if elapsed else 0.0,
            "first_token_p50_ms": p50,
            "first_token_p99_ms": p99,
            "errors": errors,
            "server_cpu_ms_per_turn": round(server_cpu * per_turn, 2),
            "client_cpu_ms_per_turn": round(clients_cpu * per_turn, 2),
            "machine_cpu_ms_per_turn": round(machine_cpu * per_turn, 2),
            "sent": sent,
        }

    def _lost(self, sent: list[Sent]) -> int:
        """Turns whose user message, or its complete reply, is not in the database."""
        connection.close()
        users = {user_id for user_id, _ in sent}
        with tenant_scope(bench_tenant()):
            questions = dict(
                Message.objects.filter(
                    author_id__in=users,
                    role=MessageRole.USER,
                    content__in=[content for _, content in sent],
                ).values_list("pk", "content")
            )
            answered = set(
                Message.objects.filter(
                    answers_id__in=questions, status=Status.COMPLETE
                ).values_list("answers_id", flat=True)
            )
        stored = {questions[pk] for pk in answered}
        return sum(1 for _, content in sent if content not in stored)
