"""The platform's ASGI server as the load benchmarks run it: uvicorn processes on the configured
database and channel layer, started and checked healthy, stopped, and the CPU they used."""

from __future__ import annotations

import http.client
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

ROOT = Path(settings.BASE_DIR)
Servers = list[subprocess.Popen[bytes]]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def servers_start(port: int, workers: int) -> Servers:
    """``workers`` uvicorn processes serving ``port``, each on a listening socket of its
    own with SO_REUSEPORT (where the platform has it): the kernel spreads new connections
    evenly over the sockets. uvicorn's ``--workers`` shares one socket, and a burst of
    connections (the clients connecting at once) can land mostly on one process, which
    then serves them all for as long as they stay open; runs measured 26/74 splits.
    Returns once they all answer their health check (:func:`_every_one_answers`); raises
    CommandError if they do not."""
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
    servers: Servers = []
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
            servers_stop(servers)
            raise CommandError(
                f"the ASGI server exited with status {exited[0]} (its output is above)"
            )
        if _healthy(port) and _every_one_answers(port, len(servers), deadline):
            return servers
        time.sleep(0.2)
    servers_stop(servers)
    raise CommandError("the ASGI server did not start")


def servers_stop(servers: Servers) -> None:
    for server in servers:
        server.terminate()
    for server in servers:
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


def servers_cpu_seconds(servers: Servers) -> float:
    """User + system CPU seconds the server processes (and their children) used so far."""
    return sum(_tree_cpu_seconds(server.pid) for server in servers)


#: The server processes count as idle below this share of one core between two reads...
SETTLED_CORE_SHARE = 0.1
#: ...taken this many seconds apart, twice in a row.
SETTLE_INTERVAL_SECONDS = 0.5


def servers_settled(servers: Servers, timeout: float = 60.0) -> float:
    """Wait until the server processes are idle (their CPU use below
    :data:`SETTLED_CORE_SHARE` of one core over two :data:`SETTLE_INTERVAL_SECONDS` in a
    row), at most ``timeout`` seconds; returns the seconds waited. A process answers its
    health check before its start-up work in the background is done: the model that embeds
    questions loads on a thread of its own, not waited for, whenever some policy retrieves by
    meaning (a preset does), and took 6-7 s of CPU per process (importing torch and
    sentence-transformers). Measured from the health check, that load was counted as the first
    protocol's server CPU (about 30 ms per turn over 500 turns) and took a core from its
    turns. Called before each measured run, it also lets the previous run's tail end."""
    started = time.monotonic()
    quiet = 0
    before = servers_cpu_seconds(servers)
    while quiet < 2 and time.monotonic() - started < timeout:
        time.sleep(SETTLE_INTERVAL_SECONDS)
        now = servers_cpu_seconds(servers)
        idle = (now - before) / SETTLE_INTERVAL_SECONDS < SETTLED_CORE_SHARE
        quiet = quiet + 1 if idle else 0
        before = now
    return time.monotonic() - started


#: Health checks made, per server process, once one has answered (:func:`_every_one_answers`).
PROBES_PER_SERVER = 8


def _every_one_answers(port: int, count: int, deadline: float) -> bool:
    """Whether every one of ``count`` processes on ``port`` answers too, once one did. Each
    has a listening socket of its own, and the kernel queues a connection on a process's
    socket before that process is done starting (importing the application, warming up):
    the first health check answered by one said nothing of the other, whose share of the
    first turns waited, counted in their first token, for the rest of its start (measured:
    200-500 ms). Which process answers cannot be chosen, so this makes
    ``PROBES_PER_SERVER`` checks per process on new connections, each waiting as long as
    its process needs: a process none of them reached is left with odds of (1 - 1/count)
    to that power (2 processes: 1 in 65,000)."""
    if count <= 1:
        return True
    for _ in range(PROBES_PER_SERVER * count):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not _healthy(port, timeout=remaining):
            return False
    return True


def _healthy(port: int, timeout: float = 5.0) -> bool:
    """Whether a server on ``port`` answers its health check: the application loaded (its
    start-up checks passed) and reached the database. A listening socket is not enough: the
    servers' sockets listen before the application is imported, and stay open while it
    fails. The header is a TLS proxy's, so that production settings do not redirect."""
    probe = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        probe.request("GET", "/healthz", headers={"X-Forwarded-Proto": "https"})
        return probe.getresponse().status == 200
    except OSError:
        return False
    finally:
        probe.close()


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
