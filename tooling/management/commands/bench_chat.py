"""Load benchmark: N WebSocket clients, each sending its turns in sequence, against a real
ASGI server process (uvicorn) on the configured database and channel layer, with the built-in
offline provider (instant: all measured time is the platform's).

By default the loop is closed and saturating: each client sends its next turn as soon as its
previous reply is done, so by Little's law a turn (first delta included) takes
``clients / turns_per_s`` whatever the platform does. ``--rate`` offers a fixed load instead,
which measures the platform's overhead at that throughput."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.models.conversations import Message
from chatplatform.services import api_key_create, membership_add
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.services import conversation_create
from tooling.benchmarks.scratch_data import bench_tenant

ROOT = Path(settings.BASE_DIR)


def _tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its children (Linux /proc; 0 elsewhere)."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    pids = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(child) for child in children]
        for each in pids:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
    except (OSError, ValueError, IndexError):
        return 0.0
    return total


def _machine_cpu_seconds() -> float:
    """Busy CPU seconds of the whole machine so far (every process: server, database, Redis,
    this load generator); 0 where /proc/stat is missing."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    except (OSError, ValueError):
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return (user + nice + system + irq + softirq + steal) / ticks


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:  # the server's extra; without it, the standard loop
        return None
    return uvloop.new_event_loop


def _stop(servers: list[subprocess.Popen[bytes]]) -> None:
    for server in servers:
        server.terminate()
    for server in servers:
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


def _healthy(port: int) -> bool:
    """Whether a server on ``port`` answers its health check: the application loaded (its
    start-up checks passed) and reached the database. A listening socket is not enough: the
    servers' sockets listen before the application is imported, and stay open while it
    fails. The header is a TLS proxy's, so that production settings do not redirect."""
    probe = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        probe.request("GET", "/healthz", headers={"X-Forwarded-Proto": "https"})
        return probe.getresponse().status == 200
    except OSError:
        return False
    finally:
        probe.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
        clients = self._setup(options["clients"])
        self._vacuum()
        port = free_port()
        servers = self._start_servers(port, options["workers"])
        try:
            # The load generator shares the machine's cores with the server: it runs on
            # uvloop, as the server does, so that it takes as little of them as it can.
            with asyncio.Runner(loop_factory=_loop_factory()) as runner:
                result = runner.run(
                    self._run(
                        port,
                        clients,
                        options["turns"],
                        options["duration"],
                        options["timeout"],
                        lambda: sum(_tree_cpu_seconds(server.pid) for server in servers),
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
            _stop(servers)
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

    def _vacuum(self) -> None:
        """Leave the hot tables as autovacuum would (it may be off on a test machine): an
        earlier run's dead rows and missing statistics are not this run's cost."""
        if connection.vendor != "postgresql":
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "VACUUM (ANALYZE) chats_conversation, chats_message, chats_turnrecord, "
                "chatplatform_apikey"
            )

    def _setup(self, count: int) -> list[tuple[int, str]]:
        from django.contrib.auth import get_user_model

        tenant = bench_tenant()
        with all_tenants():
            profile = ModelProfile.objects.get(tenant__isnull=True, name="Offline (built in)")
        with tenant_scope(tenant):
            policy, _ = ContextPolicy.objects.update_or_create(
                tenant=tenant,
                name="bench chat",
                defaults=dict(
                    model_profile=profile,
                    strategy="sliding_window",
                    max_context_tokens=16000,
                    reserved_response_tokens=1024,
                    system_budget=1000,
                    facts_budget=500,
                    summaries_budget=0,
                    retrieval_budget=0,
                    user_messages_per_minute=10000,
                ),
            )
        tenant.active_policy = policy
        tenant.save(update_fields=["active_policy"])
        User = get_user_model()
        run = uuid.uuid4().hex[:8]
        clients = []
        for index in range(count):
            user = User.objects.create_user(username=f"bench-{run}-{index}", password=None)
            membership_add(tenant=tenant, user=user)
            conversation = conversation_create(tenant=tenant, created_by=user, title=f"load {run}")
            _, raw = api_key_create(tenant=tenant, name=f"bench {run}", user=user)
            clients.append((conversation.pk, raw))
        return clients

    def _start_servers(self, port: int, workers: int) -> list[subprocess.Popen[bytes]]:
        """``workers`` uvicorn processes serving ``port``, each on a listening socket of its
        own with SO_REUSEPORT (where the platform has it): the kernel spreads new connections
        evenly over the sockets. uvicorn's ``--workers`` shares one socket, and a burst of
        connections (the clients connecting at once) can land mostly on one process, which
        then serves them all for as long as they stay open; runs measured 26/74 splits."""
        env = {**os.environ, "LOG_LEVEL": "WARNING"}
        # A server the benchmark owns needs a key even where the command-line does not.
        env.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
        # Its clients load no page, so its servers serve static files as they are: with
        # DEBUG off they would otherwise refuse to start until collectstatic had written its
        # manifest, which a checkout that only runs the benchmark never did.
        env["STATIC_MANIFEST"] = "0"
        common = [
            sys.executable,
            "-m",
            "uvicorn",
            "config.asgi:application",
            "--ws-max-size",
            "1048576",
            "--ws-per-message-deflate",
            "false",
            "--log-level",
            "warning",
            "--no-access-log",
        ]
        servers: list[subprocess.Popen[bytes]] = []
        if workers > 1 and hasattr(socket, "SO_REUSEPORT"):
            for _ in range(workers):
                listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                listener.bind(("127.0.0.1", port))
                listener.listen(2048)
                fd = listener.fileno()
                servers.append(
                    subprocess.Popen(  # noqa: S603
                        [*common, "--fd", str(fd)], cwd=ROOT, env=env, pass_fds=(fd,)
                    )
                )
                listener.close()  # the server process has its own copy
        else:
            address = ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
            servers.append(subprocess.Popen([*common, *address], cwd=ROOT, env=env))  # noqa: S603
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            exited = [server.returncode for server in servers if server.poll() is not None]
            if exited:
                _stop(servers)
                raise CommandError(
                    f"the ASGI server exited with status {exited[0]} (its output is above)"
                )
            if _healthy(port):
                return servers
            time.sleep(0.2)
        _stop(servers)
        raise CommandError("the ASGI server did not start")

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
        cpu_before, machine_before = cpu(), _machine_cpu_seconds()
        started = time.perf_counter()  # also the origin of the clients' schedule
        soak_until = started + duration
        go.set()
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
        if timeline_path:
            # [seconds from the start to the send, overhead in ms] per turn, in send order.
            Path(timeline_path).write_text(json.dumps(sorted(timeline)))
        overheads.sort()
        total = len(overheads)
        return {
            "turns_total": total,
            "turns_per_s": round(total / elapsed, 1) if elapsed else 0.0,
            "overhead_p50_ms": round(statistics.median(overheads), 2) if overheads else None,
            "overhead_p99_ms": round(overheads[min(total - 1, int(total * 0.99))], 2)
            if overheads
            else None,
            "errors": errors,
            "sent": sent,
            "server_cpu_s": cpu() - cpu_before,
            "machine_cpu_s": _machine_cpu_seconds() - machine_before,
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
