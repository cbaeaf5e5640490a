"""Settings for the test suite: the production settings with test-safe environment defaults."""

import os
import tempfile

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-used-anywhere-else-0123456789")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
os.environ.setdefault("SESSION_COOKIE_SECURE", "0")
os.environ.setdefault("CSRF_COOKIE_SECURE", "0")
os.environ.setdefault("STATIC_MANIFEST", "0")

_worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ... under pytest -n
if _worker and os.environ.get("REDIS_URL") and not os.environ.get("TEST_REDIS_PER_WORKER"):
    # Parallel workers must not share a Redis database: runner locks, delta logs and channel
    # names carry tenant and conversation ids, which the workers' own test databases hand out
    # alike, so their tests would hear each other. Each worker takes a database below the
    # configured one.
    from urllib.parse import urlsplit, urlunsplit

    _redis = urlsplit(os.environ["REDIS_URL"])
    _database = (int(_redis.path.strip("/") or 0) - 1 - int(_worker[2:])) % 16
    os.environ["REDIS_URL"] = urlunsplit(_redis._replace(path=f"/{_database}"))
    # The processes a test starts (a Celery worker, servers) inherit the worker's environment
    # and load these settings again: they must keep this database, not move one further down.
    os.environ["TEST_REDIS_PER_WORKER"] = "1"

from config.settings import *  # noqa: E402, F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The test client and WebSocket communicators send these hosts, whatever the environment's
# ALLOWED_HOSTS says (a shell that exported a production value must not fail the suite).
ALLOWED_HOSTS = [
    *ALLOWED_HOSTS,  # noqa: F405
    *(h for h in ("testserver", "localhost", "127.0.0.1") if h not in ALLOWED_HOSTS),  # noqa: F405
]

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A file, not SQLite's shared-cache in-memory database: there, a table that another
    # connection is writing is reported "locked" at once instead of waited for, and the reply
    # pipeline's database threads collide with each other and with the test's own reads.
    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": os.path.join(tempfile.gettempdir(), f"chatplatform-test-{os.getpid()}.sqlite3")
    }

# The suite sends many bad API keys from the test client's one address; the tests of the
# failure limit set their own rate (tests/security/test_brute_force.py).
API_KEY_FAILURE_RATE = "100000/min"
