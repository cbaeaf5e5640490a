"""Settings from the environment, embedded defaults, and the entry pages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PRINT_SETTINGS = (
    "import django, json; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'layer': s.CHANNEL_LAYERS['default']['BACKEND'], "
    "'broker': s.CELERY_BROKER_URL, 'cache': s.CACHES['default']['BACKEND'], "
    "'db': s.DATABASES['default']['ENGINE'], 'debug': s.DEBUG}))"
)


def run_settings(
    env_overrides: dict[str, str], unset: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(env_overrides)
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    return subprocess.run(
        [sys.executable, "-c", PRINT_SETTINGS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_embedded_defaults_need_no_server(tmp_path):
    result = run_settings({"DEBUG": "1"}, unset=("DATABASE_URL", "REDIS_URL", "SECRET_KEY"))
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout)
    assert values["layer"] == "channels.layers.InMemoryChannelLayer"
    assert values["broker"] == "filesystem://"
    assert values["cache"].endswith("LocMemCache")
    assert values["db"] == "django.db.backends.sqlite3"


def test_redis_url_moves_layer_broker_and_cache_to_redis():
    result = run_settings({"DEBUG": "1", "REDIS_URL": "redis://127.0.0.1:6379/3"})
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout)
    assert values["layer"] == "channels_redis.pubsub.RedisPubSubChannelLayer"
    assert values["broker"] == "redis://127.0.0.1:6379/3"
    assert values["cache"].endswith("RedisCache")


def run_code(code: str, env_overrides: dict[str, str], unset: tuple[str, ...] = ()):
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(env_overrides)
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("entry_point", ["config.asgi", "config.wsgi"])
def test_servers_refuse_to_start_without_a_secret_key_when_debug_is_off(entry_point):
    result = run_code(f"import {entry_point}", {"DEBUG": "0"}, unset=("SECRET_KEY",))
    assert result.returncode != 0
    assert "SECRET_KEY is required" in result.stderr


def test_celery_worker_refuses_to_start_without_a_secret_key():
    code = (
        "from config.celery import app; from celery.signals import worker_init; "
        "worker_init.send(sender=None)"
    )
    result = run_code(code, {"DEBUG": "0"}, unset=("SECRET_KEY",))
    assert result.returncode != 0
    assert "SECRET_KEY is required" in result.stderr


def test_command_line_tools_run_without_a_secret_key_but_nothing_can_sign():
    code = (
        "import django; django.setup(); from django.core import signing\n"
        "from django.core.management import call_command; call_command('check')\n"
        "try:\n    signing.dumps('x')\nexcept Exception as exc:\n    print('refused:', exc)"
    )
    result = run_code(code, {"DEBUG": "0"}, unset=("SECRET_KEY",))
    assert result.returncode == 0, result.stderr
    assert "refused: The SECRET_KEY setting must not be empty." in result.stdout


@pytest.mark.django_db
def test_root_serves_the_login_page(client):
    response = client.get("/", follow=True)
    assert response.status_code == 200
    assert b"Log in" in response.content
    assert client.get("/admin/login/").status_code == 200


@pytest.mark.django_db
def test_member_sees_their_tenant(client, tenant_a, member_a):
    client.force_login(member_a)
    response = client.get("/")
    assert response.status_code == 200
    assert b"Tenant A" in response.content
