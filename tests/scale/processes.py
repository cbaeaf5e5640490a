"""Real server processes for the slow tests: uvicorn (ASGI), Celery workers, and throwaway
redis-server and PostgreSQL instances on free ports that a test may stop, kill and restart.

Never the machine's shared Redis (6379) or PostgreSQL (5432): those serve other users.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(condition: Callable[[], Any], timeout: float = 60, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def stop(process: subprocess.Popen[Any] | None, timeout: float = 15) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def django_env(database_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        **extra,
    }


def start_uvicorn(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "config.asgi:application",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    wait_until(
        lambda: port_open(port) or process.poll() is not None, 60, f"uvicorn\n{log.read_text()}"
    )
    assert process.poll() is None, log.read_text()
    return process, port


def start_worker(
    env: dict[str, str], queue: str, name: str, log: Path, *, pool: str = "solo"
) -> subprocess.Popen[bytes]:
    """A Celery worker consuming only ``queue`` (so no other worker on the Redis takes its
    tasks); ``prefork`` runs tasks in one child process, ``solo`` in the worker itself."""
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config.celery",
                "worker",
                "-Q",
                queue,
                "-n",
                f"{name}@%h",
                "--pool",
                pool,
                "--concurrency",
                "1",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "INFO",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    wait_until(
        lambda: "ready" in log.read_text() or process.poll() is not None,
        90,
        f"worker {name}",
    )
    assert process.poll() is None, log.read_text()
    return process


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def kill9(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


class RedisServer:
    """A throwaway redis-server with an append-only file, so a restart keeps the queues (as a
    production broker must)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed"
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.dir),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
            ],
            stdout=(self.dir / "redis.log").open("ab"),
            stderr=subprocess.STDOUT,
        )
        wait_until(lambda: port_open(self.port), 20, "redis-server")
        return self

    def stop(self) -> None:
        stop(self.process)
        self.process = None


class PostgresCluster:
    """A throwaway PostgreSQL cluster (initdb into a temp dir, run as the ``postgres`` user
    when the tests run as root) on a free port, trust authentication."""

    def __init__(self) -> None:
        # Its own directory under /tmp: pytest's tmp_path is private to root (mode 700).
        self.dir = Path(tempfile.mkdtemp(prefix="chatplatform-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/chatplatform"

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{args[0]} failed: {done.stdout}{done.stderr}")

    def init(self) -> PostgresCluster:
        for tool in ("initdb", "pg_ctl"):
            assert shutil.which(tool), f"{tool} is not installed"
        if self._as:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        )
        self.start()
        self._run(
            "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "chatplatform"
        )
        return self

    def start(self) -> None:
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.dir / "pg.log"),
            "-w",
            "-o",
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def destroy(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
