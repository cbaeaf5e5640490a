"""A production start as the README documents it: the Procfile's release command (migrations,
``collectstatic``) and its web command (uvicorn) with the production settings (``DEBUG`` off, a
secret key, static files under the manifest's hashed names, TLS behind a proxy), on the test
database. The log-in page, the chat pages, the admin (with its Chart.js usage page) and the API
docs answer 200, and so does every static file they refer to."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection

from chats.services import conversation_create
from tests.factories import make_admin, make_member, make_tenant
from tests.scale.processes import ROOT, free_port, stop, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "a production password"
STATIC_REFERENCE = re.compile(r"""(?:src|href)=["'](/static/[^"']+)["']""")


def procfile_command(process: str) -> str:
    for line in (ROOT / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        if name.strip() == process:
            return command.strip()
    raise AssertionError(f"no {process} process in the Procfile")


def database_url() -> str:
    """The test database, as the server processes reach it."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    return f"postgres://{db['USER']}{password}@{host}:{db.get('PORT') or 5432}/{db['NAME']}"


def production_env(static_root: Path, port: int) -> dict[str, str]:
    """The production settings: only what an operator sets (no test settings module and none
    of the variables the test settings put into this process's environment)."""
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "STATIC_ROOT": str(static_root),
        "DATABASE_URL": database_url(),
        "DB_THREADS": "2",
        "PORT": str(port),
    }
    if os.environ.get("REDIS_URL"):
        env["REDIS_URL"] = os.environ["REDIS_URL"]
    return env


def set_production_password(user: Any) -> None:
    """The test settings hash with MD5, which the production settings do not accept."""
    hasher = PBKDF2PasswordHasher()
    user.password = hasher.encode(PASSWORD, hasher.salt(), iterations=1000)
    user.save(update_fields=["password"])


class Browser:
    """An HTTPS visitor behind the TLS proxy: the proxy's ``X-Forwarded-Proto`` header, and
    cookies kept by hand (they are ``Secure``, which a client on plain HTTP would not send)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.origin = "https://" + base_url.split("://", 1)[1]
        self.cookies: dict[str, str] = {}
        self.client = httpx.Client(base_url=base_url, timeout=30, trust_env=False)

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"X-Forwarded-Proto": "https", "Origin": self.origin}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        response = self.client.request(method, path, headers=headers, **kwargs)
        for header in response.headers.get_list("set-cookie"):
            for name, morsel in SimpleCookie(header).items():
                self.cookies[name] = morsel.value
        return response

    def get(self, path: str) -> httpx.Response:
        return self.request("GET", path)

    def log_in(self, username: str) -> None:
        form = self.get("/accounts/login/")
        assert form.status_code == 200, form.text[:2000]
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert token, form.text[:2000]
        done = self.request(
            "POST",
            "/accounts/login/",
            data={"csrfmiddlewaretoken": token[1], "username": username, "password": PASSWORD},
        )
        assert done.status_code == 302, done.text[:2000]
        assert "/accounts/login/" not in done.headers["location"]

    def page(self, path: str) -> str:
        """Load a page and every static file it refers to: all answer 200."""
        response = self.get(path)
        assert response.status_code == 200, (
            f"{path}: {response.status_code}\n{response.text[:3000]}"
        )
        assert "text/html" in response.headers["content-type"]
        for asset in set(STATIC_REFERENCE.findall(response.text)):
            served = self.get(asset)
            assert served.status_code == 200, f"{path} refers to {asset}: {served.status_code}"
        return response.text


def wait_healthy(process: subprocess.Popen[Any], base_url: str, log: Path) -> None:
    """Wait until ``base_url/healthz`` answers 200 (as behind a TLS proxy); fail with the
    process's log if it died first."""

    def healthy() -> bool:
        if process.poll() is not None:
            return True
        try:
            answer = httpx.get(
                f"{base_url}/healthz",
                headers={"X-Forwarded-Proto": "https"},
                timeout=2,
                trust_env=False,
            )
        except httpx.TransportError:
            return False
        return answer.status_code == 200

    wait_until(healthy, 90, "the web process")
    assert process.poll() is None, log.read_text()


@pytest.fixture
def production_server(tmp_path: Path, transactional_db: None) -> Iterator[str]:
    port = free_port()
    env = production_env(tmp_path / "static", port)
    release = subprocess.run(
        ["sh", "-c", procfile_command("release")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert release.returncode == 0, release.stdout + release.stderr
    assert (tmp_path / "static" / "staticfiles.json").is_file(), "no manifest after release"

    log = tmp_path / "web.log"
    with log.open("wb") as out:
        web = subprocess.Popen(
            ["sh", "-c", "exec " + procfile_command("web")],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(web, base_url, log)
        yield base_url
    finally:
        stop(web)
        connection.close()


def test_production_start_serves_every_kind_of_page(production_server: str, presets: None) -> None:
    tenant = make_tenant("Production")
    member = make_member(tenant, username="prod-member")
    admin = make_admin(tenant, username="prod-admin")
    for user in (member, admin):
        set_production_password(user)
    conversation = conversation_create(tenant=tenant, created_by=member, title="Launch")

    visitor = Browser(production_server)
    visitor.page("/accounts/login/")
    visitor.page("/api/v1/docs/")
    assert visitor.get("/api/v1/schema/").status_code == 200

    visitor.log_in("prod-member")
    visitor.page("/")
    visitor.page("/chats/")
    chat = visitor.page(f"/chats/{conversation.pk}/")
    assert re.search(r"/static/chat/chat\.[0-9a-f]{12}\.js", chat), "not the manifest's names"

    staff = Browser(production_server)
    staff.log_in("prod-admin")
    staff.page("/admin/")
    usage = staff.page(f"/admin/chatplatform/tenant/{tenant.pk}/usage/")
    assert re.search(r"/static/vendor/chartjs/chart\.umd\.min\.[0-9a-f]{12}\.js", usage)
