"""``manage.py bench_compat``: a tiny run, with the real SDKs against a real ASGI server on the
suite's database, reports every protocol's figures under their names and loses nothing, with
clients that name their conversation and with clients that resend their whole history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from tests.deploy.test_production_start import production_env
from tests.scale.processes import ROOT, free_port
from tooling.benchmarks.scratch_data import bench_tenant

pytestmark = pytest.mark.django_db(transaction=True)

FIGURES = {
    "turns_per_s",
    "first_token_p50_ms",
    "first_token_p99_ms",
    "errors",
    "lost",
    "server_cpu_ms_per_turn",
    "client_cpu_ms_per_turn",
    "machine_cpu_ms_per_turn",
}


def bench_compat(
    env: dict[str, str], args: list[str]
) -> tuple[subprocess.CompletedProcess[str], dict]:
    """``manage.py bench_compat ARGS --json`` in a process of its own: the run and its
    report (the last line of its output); it must succeed."""
    run = subprocess.run(
        [sys.executable, "manage.py", "bench_compat", *args, "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run, json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("naming", [[], ["--unnamed"]], ids=["named", "unnamed"])
def test_a_tiny_run_reports_both_protocols_and_loses_nothing(
    tmp_path: Path, presets: None, naming: list[str]
) -> None:
    env = production_env(tmp_path / "static", free_port())
    workers = "2" if os.environ.get("REDIS_URL") else "1"  # one socket per server with Redis
    command = ["--clients", "2", "--turns", "2", "--workers", workers, *naming]
    run, report = bench_compat(env, command)
    assert report["named"] is not bool(naming)
    assert report["machine_reference_ms"] > 0  # the machine's speed, beside the figures
    for protocol in ("openai", "anthropic"):
        figures = report[protocol]
        assert set(figures) >= FIGURES, figures
        assert figures["errors"] == 0 and figures["lost"] == 0, run.stdout + run.stderr
        assert figures["turns_total"] == 4 and figures["turns_per_s"] > 0
        assert 0 < figures["first_token_p50_ms"] <= figures["first_token_p99_ms"]
    with tenant_scope(bench_tenant()):  # what "lost" checked: 2 SDKs x 2 clients x 2 turns
        replies = Message.objects.filter(role="assistant", status="complete", answers__isnull=False)
        assert replies.count() == 8


def test_a_protocol_picked_runs_alone_and_again_under_its_count(
    tmp_path: Path, presets: None
) -> None:
    env = production_env(tmp_path / "static", free_port())
    picked = ["--protocol", "anthropic", "--protocol", "anthropic"]
    _, report = bench_compat(env, ["--clients", "1", "--turns", "1", "--workers", "1", *picked])
    assert "openai" not in report
    for name in ("anthropic", "anthropic-2"):
        assert report[name]["turns_total"] == 1 and report[name]["lost"] == 0, report
        assert report[name]["servers_settled_s"] >= 0
