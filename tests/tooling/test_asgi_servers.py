"""The load benchmarks' servers: a measured run starts once the server processes are idle, so
that their start-up work in the background is not counted as the run's."""

from __future__ import annotations

import subprocess
import sys

from tooling.benchmarks.asgi_servers import servers_cpu_seconds, servers_settled

#: A process that keeps a core busy for a second and a half, then idles.
BUSY_THEN_IDLE = (
    "import time\n"
    "end = time.monotonic() + 1.5\n"
    "while time.monotonic() < end:\n"
    "    pass\n"
    "time.sleep(60)\n"
)


def test_the_wait_ends_once_the_processes_are_idle() -> None:
    process = subprocess.Popen([sys.executable, "-c", BUSY_THEN_IDLE])
    try:
        waited = servers_settled([process], timeout=30)
        assert 1.0 <= waited < 10, waited  # waited for its busy start, not the timeout
        before = servers_cpu_seconds([process])
        assert before > 0.3  # its busy second and a half (less of a core on a busy machine)
        servers_settled([process], timeout=30)
        assert servers_cpu_seconds([process]) - before < 0.1  # idle after the wait
    finally:
        process.kill()
        process.wait()


def test_the_wait_gives_up_at_its_timeout() -> None:
    process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        waited = servers_settled([process], timeout=1.5)
        assert 1.5 <= waited < 3
    finally:
        process.kill()
        process.wait()
