"""Load benchmark: N WebSocket clients, each sending its turns in sequence, against a real
ASGI server process (uvicorn) on the configured database and channel layer, with the built-in
offline provider (instant: all measured time is the platform's).

By default the loop is closed and saturating: each client sends its next turn as soon as its
previous reply is done, so by Little's law a turn (first delta included) takes
``clients / turns_per_s`` whatever the platform does. ``--rate`` offers a fixed load instead,
which measures the platform's overhead at that throughput."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connection

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from tooling.benchmarks.asgi_servers import (
    free_port,
    servers_cpu_seconds,
    servers_settled,
    servers_start,
    servers_stop,
)
from tooling.benchmarks.load_runs import (
    hot_tables_vacuum,
    load_clients,
    loop_factory,
    machine_cpu_seconds,
    p50_p99,
)
from tooling.benchmarks.scratch_data import bench_tenant


class Command(BaseCommand):
    help = "Benchmark chat turns over WebSockets against a real ASGI server."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--clients", type=int, default=100)
        parser.add_argument("--turns", type=int, default=10)
        parser.add_argument(
            "--duration",
            type=float,
            default=0.0,
            help="soak: seconds to keep every client sending turns (then --turns is ignored)",
        )
        parser.add_argument(
            "--rate",
            type=float,
            default=0.0,
            help="offered load in turns per second over all clients: turn k of client i is "
            "sent at (k * clients + i) / rate seconds, or when its previous reply is done if "
            "that is later (0: every client sends its next turn at once, a saturating loop)",
        )
        parser.add_argument("--workers", type=int, default=2, help="ASGI server processes")
        parser.add_argument("--timeout", type=float, default=60.0, help="seconds per turn")
        parser.add_argument("--json", action="store_true")
        parser.add_argument(
            "--timeline",
            default="",
            metavar="PATH",
            help="also write each turn's [send time s, overhead ms] to PATH (JSON), to see "
            "how the overhead moves during the run (a start-up transient, a stall)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.REDIS_URL and options["workers"] > 1:
            options["workers"] = 1  # the in-memory channel layer does not cross processes
        clients = [
            (client.conversation_id, client.key) for client in load_clients(options["clients"])
        ]
        hot_tables_vacuum()
        port = free_port()
        servers = servers_start(port, options["workers"])
        servers_settled(servers)  # their background start-up work is not the run's
        try:
            with asyncio.Runner(loop_factory=loop_factory()) as runner:
                result = runner.run(
                    self._run(
                        port,
                        clients,
                        options["turns"],
                        options["duration"],
                        options["timeout"],
                        lambda: servers_cpu_seconds(servers),
                        options["rate"],
                        options["timeline"],
                    )
                )
            cpu_used = result.pop("server_cpu_s")
            machine_used = result.pop("machine_cpu_s")
            if options["verbosity"] >= 2 and result["turns_total"]:
                # CPU per turn is steadier than wall time on a shared machine.
                turns_total = result["turns_total"]
                self.stderr.write(
                    f"server CPU {cpu_used:.2f} s, {cpu_used * 1000 / turns_total:.2f} ms per "
                    f"turn; machine CPU {machine_used * 1000 / turns_total:.2f} ms per turn"
                )
        finally:
            servers_stop(servers)
        result["lost"] = self._lost(result.pop("sent"))
        report = {
            "clients": options["clients"],
            "turns_total": result["turns_total"],
            "turns_per_s": result["turns_per_s"],
            "overhead_p50_ms": result["overhead_p50_ms"],
            "overhead_p99_ms": result["overhead_p99_ms"],
            "errors": result["errors"],
            "lost": result["lost"],
        }
        self.stdout.write(json.dumps(report) if options["json"] else json.dumps(report, indent=2))

    async def _run(
        self,
        port: int,
        clients: list[tuple[int, str]],
        turns: int,
        duration: float,
        timeout: float,
        cpu: Any,
        rate: float = 0.0,
        timeline_path: str = "",
    ) -> dict[str, Any]:
        import websockets

        overheads: list[float] = []
        timeline: list[tuple[float, float]] = []
        errors = 0
        sent: list[tuple[int, str]] = []
        connected = 0
        all_connected = asyncio.Event()
        go = asyncio.Event()

        async def client(index: int, conversation_id: int, key: str) -> None:
            nonlocal errors, connected
            url = f"ws://127.0.0.1:{port}/ws/conversations/{conversation_id}/"
            try:
                async with websockets.connect(
                    url,
                    subprotocols=["chatplatform.v1", f"apikey.{key}"],  # type: ignore[list-item]
                    origin="http://127.0.0.1",  # type: ignore[arg-type]
                    open_timeout=60,
                    max_size=2**20,
                    compression=None,
                ) as ws:
                    connected += 1
                    if connected == len(clients):
                        all_connected.set()
                    # Turns start together once every socket is open: connecting is not a turn.
                    await go.wait()
                    turn = 0
                    while (time.perf_counter() < soak_until) if duration else turn < turns:
                        if rate:
                            slot = started + (turn * len(clients) + index) / rate
                            await asyncio.sleep(max(0.0, slot - time.perf_counter()))
                        turn += 1
                        client_id = f"{conversation_id}-{turn}"
                        sent.append((conversation_id, client_id))
                        sent_at = time.perf_counter()
                        await ws.send(
                            json.dumps(
                                {
                                    "type": "message",
                                    "client_id": client_id,
                                    "content": f"Turn {turn}: hello",
                                }
                            )
                        )
                        first = None
                        while True:
                            event = json.loads(await asyncio.wait_for(ws.recv(), timeout))
                            if event["type"] == "delta" and first is None:
                                first = time.perf_counter()
                                overheads.append((first - sent_at) * 1000)
                                timeline.append((sent_at - started, (first - sent_at) * 1000))
                            elif event["type"] == "done":
                                break
                            elif event["type"] == "error":
                                errors += 1
                                break
            except Exception as exc:
                errors += 1
                all_connected.set()
                self.stderr.write(f"client {conversation_id}: {exc!r}")

        tasks = [
            asyncio.create_task(client(index, cid, key)) for index, (cid, key) in enumerate(clients)
        ]
        await asyncio.wait_for(all_connected.wait(), 120)
        cpu_before, machine_before = cpu(), machine_cpu_seconds()
        started = time.perf_counter()  # also the origin of the clients' schedule
        soak_until = started + duration
        go.set()
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
        if timeline_path:
            # [seconds from the start to the send, overhead in ms] per turn, in send order.
            Path(timeline_path).write_text(json.dumps(sorted(timeline)))
        total = len(overheads)
        p50, p99 = p50_p99(overheads)
        return {
            "turns_total": total,
            "turns_per_s": round(total / elapsed, 1) if elapsed else 0.0,
            "overhead_p50_ms": p50,
            "overhead_p99_ms": p99,
            "errors": errors,
            "sent": sent,
            "server_cpu_s": cpu() - cpu_before,
            "machine_cpu_s": machine_cpu_seconds() - machine_before,
        }

    def _lost(self, sent: list[tuple[int, str]]) -> int:
        """Turns whose user message or complete reply is missing from the database."""
        connection.close()
        tenant = bench_tenant()
        conversations = {conversation_id for conversation_id, _ in sent}
        with tenant_scope(tenant):
            answered = set(
                Message.objects.filter(
                    conversation_id__in=conversations, status="complete", answers__isnull=False
                ).values_list("answers_id", flat=True)
            )
            stored = {
                (conversation_id, client_id)
                for pk, conversation_id, client_id in Message.objects.filter(
                    conversation_id__in=conversations, client_id__isnull=False
                ).values_list("pk", "conversation_id", "client_id")
                if pk in answered
            }
        return sum(1 for turn in sent if turn not in stored)
