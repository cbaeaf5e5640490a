"""Browser tests: Chromium (Debian's package) driven by Playwright, against the ASGI
application served by uvicorn in a thread of the test process, on the test database (so
WebSockets work, unlike Django's WSGI live server).

Screenshots go to ``test-artifacts/``. Chromium is found at ``CHROMIUM_PATH`` (default
``/usr/bin/chromium``); without it, or without Playwright, the tests are skipped.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "pw"


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """SQLite: a file database (WAL, busy timeout) instead of shared memory, so the server's
    threads and the test can write at the same time. Connections are not kept between
    requests, so the test database can be dropped at the end (PostgreSQL)."""
    from django.db import connections

    settings = connections.databases["default"]
    settings["CONN_MAX_AGE"] = 0
    if settings["ENGINE"].endswith("sqlite3"):
        (ROOT / "var").mkdir(exist_ok=True)
        settings.setdefault("TEST", {})["NAME"] = str(ROOT / "var" / "browser-tests.sqlite3")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def live_server_url(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    """The platform (HTTP + WebSockets) on a free local port, for the whole session."""
    pytest.importorskip("uvicorn")
    import uvicorn

    from tests.browser.asgi import application

    port = _free_port()
    config = uvicorn.Config(
        application,
        host="127.0.0.1",
        port=port,
        lifespan="off",
        log_level="warning",
        ws_max_size=8 * 1024 * 1024,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="browser-test-server", daemon=True)
    with django_db_blocker.unblock():
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API keeps an event loop on this thread, which Django's async-safety
    # guard mistakes for async code: the tests' own ORM calls (fixtures, checks) are plain
    # synchronous code. Set only once a browser test runs.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(autouse=True)
def _test_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every browser test starts with the controllable offline provider, replying at once."""
    from chats.replies.coordination import coordination_reset
    from tests.browser.asgi import DELAY_VARIABLE, install

    monkeypatch.setenv(DELAY_VARIABLE, "0")
    coordination_reset()
    install()
    yield


#: The widths every flow is tried at: a phone and a laptop.
WIDTHS = (375, 1280)
#: In a module's ``pytestmark``: its tests run on a ``page`` at each of :data:`WIDTHS`.
AT_BOTH_WIDTHS = pytest.mark.parametrize(
    "page", WIDTHS, indirect=True, ids=lambda width: f"{width}px"
)


@pytest.fixture
def page(request: Any, browser: Any, live_server_url: str) -> Iterator[Any]:
    """A browser tab, 1280 px wide unless the test is parametrised with a width
    (:data:`AT_BOTH_WIDTHS`)."""
    width = getattr(request, "param", 1280)
    height = 812 if width < 760 else 900
    context = browser.new_context(
        viewport={"width": width, "height": height}, base_url=live_server_url
    )
    context.set_default_timeout(15_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    violations = watch_csp(tab)
    yield tab
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
    assert not violations, f"Content-Security-Policy violations: {violations}"


def watch_csp(page: Any) -> list[str]:
    """The Content-Security-Policy violations Chromium reports on ``page``'s console."""
    violations: list[str] = []

    def seen(message: Any) -> None:
        if "Content Security Policy" in message.text:
            violations.append(message.text)

    page.on("console", seen)
    return violations


def screenshot(page: Any, name: str, *, full_page: bool = True) -> Path:
    """``test-artifacts/<name>.png``; a phone-width page's name ends in ``-375``."""
    ARTIFACTS.mkdir(exist_ok=True)
    width = (page.viewport_size or {}).get("width", 1280)
    suffix = f"-{width}" if width < 760 and not name.endswith(f"-{width}") else ""
    path = ARTIFACTS / f"{name}{suffix}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def log_in(page: Any, username: str, password: str = PASSWORD) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
