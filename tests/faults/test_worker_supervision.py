"""A worker rides out a broker restart by itself, and what it cannot ride out its supervisor
brings back: the Celery app never gives up on the broker nor kills the task it holds, and the
supervision documented for production (``docs/supervision.md``) runs exactly the ``Procfile``
processes and restarts every one of them, without a limit. The broker restart itself, under a
busy worker: ``test_broker_restart.py``."""

from __future__ import annotations

import configparser
import re
import shlex
from pathlib import Path

import pytest
from django.conf import settings

from config.celery import app

ROOT = Path(settings.BASE_DIR)


def test_a_worker_never_gives_up_on_the_broker():
    conf = app.conf
    assert conf.broker_connection_retry is True
    assert conf.broker_connection_retry_on_startup is True
    # Celery's default gives up after 100 attempts, and the worker exits.
    assert conf.broker_connection_max_retries is None
    # The task held when the connection dropped finishes; its redelivery finds the work done.
    assert conf.worker_cancel_long_running_tasks_on_connection_loss is False
    assert conf.task_acks_late is True and conf.task_reject_on_worker_lost is True


def procfile() -> dict[str, list[str]]:
    found = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        if command.strip():
            found[name.strip()] = shlex.split(command)
    return found


def documented_units() -> dict[str, configparser.ConfigParser]:
    """The systemd units in ``docs/supervision.md``, by the process they run."""
    text = (ROOT / "docs" / "supervision.md").read_text()
    units = {}
    for block in re.findall(r"```ini\n(.*?)```", text, flags=re.S):
        name = re.search(r"chatplatform-(\w+)\.service", block)
        assert name, block
        unit = configparser.ConfigParser(interpolation=None)
        unit.optionxform = str  # type: ignore[assignment,method-assign]
        unit.read_string(block)
        units[name.group(1)] = unit
    return units


@pytest.mark.parametrize("process", ["web", "worker", "beat"])
def test_production_restarts_every_long_running_process(process):
    unit = documented_units()[process]
    command = shlex.split(unit["Service"]["ExecStart"])
    command[0] = Path(command[0]).name  # the virtualenv's copy of the same program
    assert command == procfile()[process]
    assert unit["Service"]["Restart"] == "always"
    assert float(unit["Service"]["RestartSec"]) <= 5
    assert unit["Unit"]["StartLimitIntervalSec"] == "0"  # systemd never stops trying


def test_a_stopped_worker_may_finish_its_task():
    stop = int(documented_units()["worker"]["Service"]["TimeoutStopSec"])
    assert stop > settings.CELERY_TASK_TIME_LIMIT
