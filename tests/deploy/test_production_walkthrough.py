"""The README's production walkthrough, run as it is written: its settings (each given a value
of this test's), its release command, its processes (honcho with the Procfile), and its
``create_tenant`` line; then the new admin sets a password through the printed link, logs in,
and the printed API key streams one reply. The commands are read from the README, so the test
fails when the README and the product drift apart."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection

from tests.deploy.test_production_start import (
    PASSWORD,
    Browser,
    procfile_command,
    production_env,
    wait_healthy,
)
from tests.scale.processes import ROOT, free_port

pytestmark = pytest.mark.django_db(transaction=True)

MARKER = "<!-- production-walkthrough -->"


@dataclass(frozen=True)
class Walkthrough:
    settings: dict[str, str]  # as written
    commands: list[str]


def readme_walkthrough() -> Walkthrough:
    """The settings and commands of the README's walkthrough block, in order."""
    text = (ROOT / "README.md").read_text()
    assert MARKER in text, "the README has no production walkthrough block"
    block = re.search(r"```sh\n(.*?)```", text[text.index(MARKER) :], re.DOTALL)
    assert block, "the walkthrough marker is not followed by a sh block"
    settings: dict[str, str] = {}
    commands = []
    for line in block[1].splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            for assignment in shlex.split(line)[1:]:
                name, _, value = assignment.partition("=")
                settings[name] = value
        else:
            commands.append(line)
    return Walkthrough(settings, commands)


def walkthrough_env(static_root: Path, port: int) -> dict[str, str]:
    """This test's value for each setting the walkthrough names (a setting it does not know
    fails the test: give it a value here)."""
    env = production_env(static_root, port)
    walkthrough = readme_walkthrough()
    ours = {
        "DEBUG": "0",
        "SECRET_KEY": env["SECRET_KEY"],
        "ALLOWED_HOSTS": env["ALLOWED_HOSTS"],
        "DATABASE_URL": env["DATABASE_URL"],
        "REDIS_URL": os.environ.get("REDIS_URL", ""),  # empty: the embedded defaults
        "EMAIL_URL": "consolemail://",
        "FORWARDED_ALLOW_IPS": "127.0.0.1",
        "ANTHROPIC_API_KEY": "",  # no network: the offline provider answers
    }
    assert set(walkthrough.settings) == set(ours), "a setting of the README has no test value"
    assert walkthrough.settings["DEBUG"] == "0", "the walkthrough is a production set-up"
    env.update(ours)
    if not env["REDIS_URL"]:
        del env["REDIS_URL"]
    return env


def run(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["sh", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[tuple[dict[str, str], str, list[str]]]:
    """The walkthrough's release and processes; yields the environment, the base URL and the
    commands left to run."""
    port = free_port()
    env = walkthrough_env(tmp_path / "static", port)
    commands = readme_walkthrough().commands
    assert len(commands) == 3, commands
    release, start, *rest = commands
    assert release == procfile_command("release"), "the README's release is not the Procfile's"
    run(release, env)
    assert (tmp_path / "static" / "staticfiles.json").is_file(), "no manifest after release"

    assert start.startswith("honcho start "), start
    names = start.split()[2:]
    assert names == ["web", "worker", "beat"], names
    log = tmp_path / "processes.log"
    with log.open("wb") as out:
        honcho = subprocess.Popen(
            ["sh", "-c", "exec " + start],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, stopped as one
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(honcho, base_url, log)
        yield env, base_url, rest
        assert honcho.poll() is None, log.read_text()  # nothing died on the way
    finally:
        _stop_group(honcho)
        connection.close()


def _stop_group(process: subprocess.Popen[Any]) -> None:
    """Stop honcho and every process it started (they share its process group)."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def set_password(visitor: Browser, link_path: str) -> None:
    """Follow the one-time link and choose ``PASSWORD``, as the admin does in a browser."""
    opened = visitor.get(link_path)
    assert opened.status_code == 302, opened.text[:2000]
    form_path = opened.headers["location"]
    form = visitor.get(form_path)
    assert form.status_code == 200 and "new_password1" in form.text, form.text[:2000]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    assert token, form.text[:2000]
    done = visitor.request(
        "POST",
        form_path,
        data={
            "csrfmiddlewaretoken": token[1],
            "new_password1": PASSWORD,
            "new_password2": PASSWORD,
        },
    )
    assert done.status_code == 302 and "/accounts/reset/done/" in done.headers["location"], (
        done.text[:2000]
    )


def stream_reply(base_url: str, key: str, text: str) -> list[tuple[str, dict[str, Any]]]:
    headers = {"Authorization": f"Bearer {key}", "X-Forwarded-Proto": "https"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=60, trust_env=False) as api:
        created = api.post("/api/v1/conversations/", json={"title": "First"})
        assert created.status_code == 201, created.text
        path = f"/api/v1/conversations/{created.json()['id']}/messages/"
        events: list[tuple[str, dict[str, Any]]] = []
        with api.stream(
            "POST", path, json={"content": text}, headers={"Accept": "text/event-stream"}
        ) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            event = ""
            for line in response.iter_lines():
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event:
                    events.append((event, json.loads(line.removeprefix("data: "))))
                    event = ""
    return events


def test_the_readme_production_walkthrough_as_written(processes, presets: None) -> None:
    env, base_url, (create,) = processes
    assert "create_tenant" in create and "--api-key" in create, create
    admin_email = shlex.split(create)[shlex.split(create).index("--admin-email") + 1]

    printed = run(create, env).stdout.rstrip("\n").splitlines()
    link = next(line for line in printed if "/accounts/reset/" in line)
    assert link.startswith("https://127.0.0.1/accounts/reset/"), link  # ALLOWED_HOSTS' host
    key = printed[-1]
    assert key.startswith("cpk_") and " " not in key, printed

    again = subprocess.run(
        ["sh", "-c", create], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert again.returncode != 0 and "exists already" in again.stderr, again

    admin = Browser(base_url)
    set_password(admin, link.removeprefix("https://127.0.0.1"))
    admin.log_in(admin_email)
    home = admin.page("/")
    assert "Acme" in home and "No tenant" not in home
    admin.page("/admin/")
    me = admin.get("/api/v1/me/").json()  # the session reaches the API too
    assert me["tenant"]["name"] == "Acme" and me["is_admin"] is True

    events = stream_reply(base_url, key, "Hello from the walkthrough")
    names = [name for name, _ in events]
    assert names[0] == "ack" and names[-1] == "done", names
    assert events[-1][1]["status"] == "complete", events[-1]
    assert "".join(data["text"] for name, data in events if name == "delta").strip()
