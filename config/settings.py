"""Django settings, read from the environment (django-environ).

Embedded defaults (no servers needed): SQLite file, in-memory channel layer, Celery on kombu's
filesystem transport, local-memory cache, offline model provider. Setting ``REDIS_URL`` moves
the channel layer, the Celery broker and the cache to Redis; ``DATABASE_URL`` moves the database.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import environ

from .content_security import content_security_policy
from .rest_api import API_SCHEMA_SETTINGS, rest_framework_settings

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DEBUG", default=False)
_secret = env.str("SECRET_KEY", default="")
if not _secret and DEBUG:
    _secret = "dev-only-insecure-secret-key-do-not-use-in-production-0123456789"  # noqa: S105
# Without DEBUG there is no default: command-line tools that sign nothing (migrate, the
# benchmarks and evaluations) still run, Django refuses any use of the empty key, and every
# serving entry point (ASGI, WSGI, Celery, runserver) refuses to start:
# ``config.startup.require_secret_key``.
SECRET_KEY = _secret

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "console.site.ChatPlatformAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_celery_beat",
    "axes",
    "csp",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "chatplatform",
    "chats",
    "memory",
    "summaries",
    "console",
    "tooling",
]

MIDDLEWARE = [
    "chatplatform.middleware.StreamingConnectionsReleaseMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "chatplatform.middleware.TenantScopeMiddleware",
    "csp.middleware.CSPMiddleware",
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'var' / 'db.sqlite3'}"),
}
# Persistent connections: the reply runner's steps run on pool threads, each keeping its
# connection; opening one per step would cost more than the step. (PostgreSQL with the
# connection pool below: none, the pool keeps them.)
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
#: Threads that run the ORM steps of replies in each ASGI process (each keeps a persistent
#: connection, or takes one from the pool for each step).
DB_THREADS = env.int("DB_THREADS", default=12)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
#: PostgreSQL: each process's connections come from a pool (psycopg_pool, through Django)
#: of at most DATABASE_POOL_MAX_SIZE. Every request of the APIs runs its view on a thread
#: of its own: with persistent connections each such thread kept one, and 50 concurrent API
#: clients took all of PostgreSQL's 100. A thread holds a pooled connection only for a unit
#: of work (a request until it answers or starts streaming, a reply step, a task;
#: ``chatplatform.db.thread_connections_release``); one that waits longer than
#: DATABASE_POOL_TIMEOUT seconds for one fails as the database being unreachable (the APIs'
#: 503). Size: (ASGI processes + Celery worker processes + beat) x max size, well under
#: PostgreSQL's ``max_connections``.
DATABASE_POOL = DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env.bool(
    "DATABASE_POOL", default=True
)
if DATABASE_POOL:
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django's pool requires it
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env.int("DATABASE_POOL_MIN_SIZE", default=2),
        "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=10),
        "timeout": env.float("DATABASE_POOL_TIMEOUT", default=10.0),
        "name": "default",
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env.bool(
    "DB_SERVER_SIDE_BINDING", default=True
):
    # Parameters sent apart from the SQL (no client-side quoting of every value), and every
    # statement a connection runs DB_PREPARE_THRESHOLD times prepared on it (psycopg keeps the
    # 100 most recent per connection): PostgreSQL then skips parsing and planning it, which on
    # the reply path was about a sixth of the machine's CPU per turn. The assembly's history
    # and summaries statements are prepared at their first run whatever the threshold
    # (chatplatform.db.execute_prepared); the full-text search never is, since its best plan
    # depends on its values (chatplatform.db.execute_planned). Behind PgBouncer in
    # transaction mode this needs PgBouncer 1.21+ with max_prepared_statements; set
    # DB_SERVER_SIDE_BINDING=0 for older ones (then nothing is prepared).
    DATABASES["default"].setdefault("OPTIONS", {})["server_side_binding"] = True
    DATABASES["default"]["OPTIONS"].setdefault(
        "prepare_threshold", env.int("DB_PREPARE_THRESHOLD", default=1)
    )
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    (BASE_DIR / "var").mkdir(exist_ok=True)
    DATABASES["default"].setdefault("OPTIONS", {})
    # WAL + a busy timeout let the web process, the worker and beat share one file.
    DATABASES["default"]["OPTIONS"].setdefault(
        "init_command", "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    )
    DATABASES["default"]["OPTIONS"].setdefault("timeout", 20)
    DATABASES["default"]["OPTIONS"].setdefault("transaction_mode", "IMMEDIATE")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default="")

if REDIS_URL:
    # Pub/sub: one PUBLISH per group event and one shared subscription per process, instead of
    # a Lua push per member and a BRPOP per socket. Delivery is at-most-once either way; the
    # delta log and the database are what a reconnecting client resyncs from. Redis pub/sub
    # channels ignore the database number, so the prefix carries it (tests and benchmarks on
    # other databases of the same server never hear each other).
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {
                "hosts": [REDIS_URL],
                "prefix": env.str(
                    "CHANNEL_LAYER_PREFIX",
                    default="asgi.db" + (urlsplit(REDIS_URL).path.strip("/") or "0"),
                ),
            },
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "chatplatform.redis_cache.ProcessRedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "chatplatform",
            "OPTIONS": {"socket_timeout": 5, "socket_connect_timeout": 5},
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    # The visibility timeout is set with the jobs' time limits and locks (below).
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    _broker_dir = BASE_DIR / "var" / "broker"
    for _sub in ("queue", "processed"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "store_processed": False,
    }

CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Ticks only while it holds a lock, so a second beat started by mistake stays idle.
CELERY_BEAT_SCHEDULER = "summaries.beat:LockedDatabaseScheduler"
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TIMEZONE = "UTC"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
# `manage.py collectstatic` gathers the static files here (the release process runs it); with
# DEBUG off their names carry content hashes from the manifest it writes, which pages need.
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").is_dir() else []
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if not DEBUG and env.bool("STATIC_MANIFEST", default=True)
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = True
MEDIA_URL = "/media/"
MEDIA_ROOT = env.path("MEDIA_ROOT", default=str(BASE_DIR / "var" / "media"))

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "chats_ui:conversation_list"  # after log-in, the user's chats
LOGOUT_REDIRECT_URL = "/accounts/login/"
PASSWORD_RESET_TIMEOUT = env.int("PASSWORD_RESET_TIMEOUT", default=3 * 24 * 3600)
PASSWORD_RESET_CLIENT_LIMIT = env.int("PASSWORD_RESET_CLIENT_LIMIT", default=10)  # an hour
PASSWORD_RESET_ADDRESS_LIMIT = env.int("PASSWORD_RESET_ADDRESS_LIMIT", default=3)  # an hour
INVITATION_VALID_DAYS = env.int("INVITATION_VALID_DAYS", default=7)  # a link's life
INVITATION_CLIENT_LIMIT = env.int("INVITATION_CLIENT_LIMIT", default=30)  # page views an hour
# E-mail: printed to the console unless EMAIL_URL names a server (smtp+tls://user:pw@host:587).
vars().update(env.email_url("EMAIL_URL", default="consolemail://"))
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="chatplatform <noreply@localhost>")
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=10)  # seconds, for every SMTP call

# Model providers. Without ANTHROPIC_API_KEY (and without OPENAI_BASE_URL) the platform uses the
# built-in offline provider, so a fresh clone works with no account.
ANTHROPIC_API_KEY = env.str("ANTHROPIC_API_KEY", default="")
ANTHROPIC_BASE_URL = env.str("ANTHROPIC_BASE_URL", default="")
OPENAI_BASE_URL = env.str("OPENAI_BASE_URL", default="")
OPENAI_API_KEY = env.str("OPENAI_API_KEY", default="")
LLM_TIMEOUT_SECONDS = env.float("LLM_TIMEOUT_SECONDS", default=60.0)
TOKEN_COUNT_TIMEOUT_SECONDS = env.float("TOKEN_COUNT_TIMEOUT_SECONDS", default=5.0)
# Shared Anthropic model profiles updated from the provider's Models API every N hours
# (chatplatform/model_catalog.py); 0: never on a schedule (the admin's action still works).
MODEL_CATALOG_SYNC_HOURS = env.float("MODEL_CATALOG_SYNC_HOURS", default=0)
MODEL_CATALOG_TIMEOUT_SECONDS = env.float("MODEL_CATALOG_TIMEOUT_SECONDS", default=10.0)
# Beat copies these entries into its database schedules when it starts.
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = (
    {
        "Model profiles from the provider": {
            "task": "chatplatform.tasks.update_model_profiles_from_provider",
            "schedule": MODEL_CATALOG_SYNC_HOURS * 3600,
        }
    }
    if MODEL_CATALOG_SYNC_HOURS > 0
    else {}
)

# --- Model endpoints that tenants name (chatplatform/model_endpoints.py) ----------------------
# Platform credentials only go to the endpoints above or to platform-wide profiles. A tenant's
# own profile may name its own endpoint (with its own key, never the platform's) only on a host
# listed here ("*.example.com" for subdomains); empty: tenants cannot name endpoints.
TENANT_MODEL_HOSTS = env.list("TENANT_MODEL_HOSTS", default=[])
TENANT_MODEL_ALLOW_HTTP = env.bool("TENANT_MODEL_ALLOW_HTTP", default=False)
TENANT_MODEL_ALLOW_PRIVATE_NETWORKS = env.bool("TENANT_MODEL_ALLOW_PRIVATE_NETWORKS", default=False)
# Fernet keys (comma-separated, newest first) that encrypt tenants' own API keys at rest;
# without one a key is derived from SECRET_KEY (set one to rotate SECRET_KEY independently).
FIELD_ENCRYPTION_KEY = env.list("FIELD_ENCRYPTION_KEY", default=[])
# --- end of model endpoints -------------------------------------------------------------------

# --- Images named by URL (chats/image_urls.py) ------------------------------------------------
# An SDK-compatible request may name an image by URL instead of sending it inline. The platform
# fetches it only from a host listed here ("*.example.com" for subdomains), over https unless
# http is allowed, never from a private address unless allowed; empty: only inline images.
IMAGE_URL_HOSTS = env.list("IMAGE_URL_HOSTS", default=[])
IMAGE_URL_ALLOW_HTTP = env.bool("IMAGE_URL_ALLOW_HTTP", default=False)
IMAGE_URL_ALLOW_PRIVATE_NETWORKS = env.bool("IMAGE_URL_ALLOW_PRIVATE_NETWORKS", default=False)
IMAGE_URL_TIMEOUT_SECONDS = env.float("IMAGE_URL_TIMEOUT_SECONDS", default=10.0)

# Single sign-on (OpenID Connect, per tenant: chatplatform/single_sign_on/). The operator's rules
# for the identity providers' endpoints (the issuer and every URL its discovery names), the
# same rules as tenants' model endpoints: hosts on the list (exact, or *.example.com), https
# unless SSO_ALLOW_HTTP, public addresses unless SSO_ALLOW_PRIVATE_NETWORKS. Empty list: no
# single sign-on at all.
SSO_PROVIDER_HOSTS = env.list("SSO_PROVIDER_HOSTS", default=[])
SSO_ALLOW_HTTP = env.bool("SSO_ALLOW_HTTP", default=False)
SSO_ALLOW_PRIVATE_NETWORKS = env.bool("SSO_ALLOW_PRIVATE_NETWORKS", default=False)
SSO_TIMEOUT_SECONDS = env.float("SSO_TIMEOUT_SECONDS", default=10.0)
SSO_DISCOVERY_CACHE_SECONDS = env.int("SSO_DISCOVERY_CACHE_SECONDS", default=3600)

# Background jobs: time limits, locks and redelivery, each derived from the one before
# (docs/jobs.md). A job's hard time limit < the lock it holds < the broker's visibility
# timeout: a live task never outlives its lock, and a task whose worker died is handed out
# again once its lock has expired, so it runs again, once, within minutes.
#: One unit of a job's work: a summary chunk is the model's answer and at most one retry of
#: an invalid answer, each within the model timeout.
JOB_UNIT_SECONDS = 2 * int(LLM_TIMEOUT_SECONDS)
#: A job starts no new unit after this; what remains goes to a follow-up run.
JOB_WORK_SECONDS = 60
CELERY_TASK_SOFT_TIME_LIMIT = JOB_WORK_SECONDS + JOB_UNIT_SECONDS  # 180 s
#: After the soft limit, time to stop cleanly (keep what is done, let go of the lock).
CELERY_TASK_TIME_LIMIT = CELERY_TASK_SOFT_TIME_LIMIT + 60  # 240 s
#: A job's lock outlives its holder's hard limit: only a dead holder's lock expires.
JOB_LOCK_SECONDS = CELERY_TASK_TIME_LIMIT + 60  # 300 s
#: The Redis broker hands out again a task whose worker was lost after this (its lock is free
#: by then). ``CELERY_VISIBILITY_TIMEOUT`` in the environment overrides it (tests that kill
#: workers shorten it).
JOB_VISIBILITY_SECONDS = JOB_LOCK_SECONDS + 60  # 360 s
#: A retry waits at most this long: the broker holds a delayed task unacknowledged on its
#: worker until it is due, so its wait plus its run must end within the visibility timeout.
JOB_RETRY_BACKOFF_MAX = JOB_VISIBILITY_SECONDS - CELERY_TASK_TIME_LIMIT - 60  # 60 s
CELERY_VISIBILITY_TIMEOUT = env.int("CELERY_VISIBILITY_TIMEOUT", default=JOB_VISIBILITY_SECONDS)
if REDIS_URL:
    CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] = CELERY_VISIBILITY_TIMEOUT
    # Look for tasks to hand out again every few seconds, not every 100 (kombu's default).
    CELERY_BROKER_TRANSPORT_OPTIONS["unacked_restore_interval"] = max(
        1, min(10, CELERY_VISIBILITY_TIMEOUT // 2)
    )
    CELERY_BROKER_TRANSPORT_OPTIONS["unacked_restore_throttle"] = 1

# Limits for end-user input.
CHAT_MAX_MESSAGE_CHARS = env.int("CHAT_MAX_MESSAGE_CHARS", default=64 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=2 * 1024 * 1024)
#: Largest request body outside the API (bytes), refused with 413 by the ASGI server before it
#: is read (config/body_limits.py); the API's is API_MAX_BODY_BYTES.
REQUEST_MAX_BODY_BYTES = env.int("REQUEST_MAX_BODY_BYTES", default=8 * 1024 * 1024)

# Conversations moved in and out (chats/transfer/, docs/operations.md): the private folder of
# uploaded imports and written exports (never served publicly; downloads go through signed,
# expiring links), the largest import file (bytes, upload and command alike; the upload's
# request may be this large), and how long an export's download link works (hours; then the
# file is removed).
TRANSFER_ROOT = env.path("TRANSFER_ROOT", default=str(BASE_DIR / "var" / "transfers"))
TRANSFER_IMPORT_MAX_BYTES = env.int("TRANSFER_IMPORT_MAX_BYTES", default=50 * 1024 * 1024)
TRANSFER_LINK_HOURS = env.float("TRANSFER_LINK_HOURS", default=24.0)

# Production hardening: on whenever DEBUG is off (check --deploy prints no warning).
if not DEBUG:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
    CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=True)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}

# --- REST API (chats.api; its framework and schema settings: config/rest_api.py) -
REST_FRAMEWORK = rest_framework_settings(env)
SPECTACULAR_SETTINGS = API_SCHEMA_SETTINGS
#: Largest request body the API reads (bytes); larger ones get 413, before they are read
#: (config/body_limits.py). The default leaves room for a message with an image
#: (at most 5 MB, about 6.7 MB as base64) and its longest text.
API_MAX_BODY_BYTES = env.int("API_MAX_BODY_BYTES", default=8 * 1024 * 1024)
#: How long a JSON message request waits for its reply before answering 202 (seconds).
API_REPLY_WAIT_SECONDS = env.float("API_REPLY_WAIT_SECONDS", default=90.0)
#: How long a server-sent event stream waits for its reply's end (seconds).
API_STREAM_TIMEOUT_SECONDS = env.float("API_STREAM_TIMEOUT_SECONDS", default=300.0)
#: A comment line is sent on an idle event stream this often (seconds), for proxies.
API_STREAM_KEEPALIVE_SECONDS = env.float("API_STREAM_KEEPALIVE_SECONDS", default=15.0)
# --- end of REST API ---------------------------------------------------------------------------

# --- Brute-force protection and Content-Security-Policy (chatplatform.bruteforce) -----------
# Log-in pages (the site's and the admin's): django-axes locks a username from one client
# address after LOGIN_FAILURE_LIMIT failed attempts for LOGIN_LOCKOUT_MINUTES (a correct
# password is refused meanwhile; a success clears the count). Attempts are kept in the database
# (admins see and delete them under "Axes"; ``manage.py axes_reset`` clears them all). The
# client address is the one the ASGI server reports: behind a proxy, uvicorn's
# --proxy-headers takes it from X-Forwarded-For only for connections from FORWARDED_ALLOW_IPS.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# The database handler, plus a lock per client address that failed with more than
# LOGIN_ADDRESS_USERNAME_LIMIT usernames within the lockout period (password spraying).
AXES_HANDLER = "chatplatform.login_limits.AddressLimitedDatabaseHandler"
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
LOGIN_ADDRESS_USERNAME_LIMIT = env.int("LOGIN_ADDRESS_USERNAME_LIMIT", default=10)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_DISABLE_ACCESS_LOG = True  # failures are kept; successful log-ins are not logged
AXES_LOCKOUT_CALLABLE = "chatplatform.bruteforce.lockout_response"
AXES_CLIENT_IP_CALLABLE = "chatplatform.client_address.client_ip"
#: Failed API-key look-ups allowed per client address (an IPv6 /64) and period; past it
#: every API-key request from that address is refused (429, or a refused WebSocket handshake),
#: valid keys included, until the period ends.
API_KEY_FAILURE_RATE = env.str("API_KEY_FAILURE_RATE", default="20/min")

# Content-Security-Policy on every page (config/content_security.py).
# CSP_REPORT_ONLY=1 sends it as Content-Security-Policy-Report-Only, to try it on a deployment
# first; CSP_REPORT_URI receives the reports.
_csp_policy = content_security_policy(env.str("CSP_REPORT_URI", default=""))
if env.bool("CSP_REPORT_ONLY", default=False):
    CONTENT_SECURITY_POLICY_REPORT_ONLY = _csp_policy
else:
    CONTENT_SECURITY_POLICY = _csp_policy
# --- end of brute-force protection and Content-Security-Policy --------------------------------

# --- WebSocket credentials (chats.socket_access) --------------------------------------------
# A socket closes when the key or session that opened it ends: at once by a channel-layer
# event, and, should that event be lost, at the socket's next frame or event once its last
# check is older than this (seconds; 0 checks before every frame and event).
WS_AUTH_RECHECK_SECONDS = env.float("WS_AUTH_RECHECK_SECONDS", default=30.0)
# --- end of WebSocket credentials -----------------------------------------------------------
