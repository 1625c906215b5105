"""garden settings, chosen by environment variables alone.

Unset, everything is embedded: SQLite under var/, an in-memory channel layer, a local lock
and a Celery worker on a server-less filesystem transport. DATABASE_URL switches to
PostgreSQL; REDIS_URL switches the broker, the per-group lock and the channel layer to Redis.
Importing this module only reads: the folders it names under var/ are made when Django starts
(garden.apps).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from config.validation import check_egress_and_keys, check_step_limits, secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

GARDEN_ENV = env.str("GARDEN_ENV", default="development")
if GARDEN_ENV not in {"development", "production"}:
    raise ImproperlyConfigured(
        f"GARDEN_ENV must be 'development' or 'production', not {GARDEN_ENV!r}"
    )
PRODUCTION = GARDEN_ENV == "production"

VAR_DIR = Path(env.str("GARDEN_VAR_DIR", default=str(BASE_DIR / "var")))

SECRET_KEY = secret_key(
    configured=env.str("DJANGO_SECRET_KEY", default=""), production=PRODUCTION, var_dir=VAR_DIR
)
DEBUG = env.bool("DJANGO_DEBUG", default=not PRODUCTION)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=[] if PRODUCTION else ["*"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

# --- HTTPS and browser protections ----------------------------------------------------------
# GARDEN_HTTPS (on in production): cookies only over HTTPS, plain HTTP redirected, HSTS.
# GARDEN_BEHIND_PROXY: trust X-Forwarded-Proto from the TLS-terminating proxy in front (only
# when that proxy sets it and clients cannot reach garden around it).
GARDEN_HTTPS = env.bool("GARDEN_HTTPS", default=PRODUCTION)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = GARDEN_HTTPS
SESSION_COOKIE_HTTPONLY = True
SECURE_SSL_REDIRECT = GARDEN_HTTPS
# Prometheus scrapes /metrics inside the deployment's network, with its bearer (below).
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
SECURE_HSTS_SECONDS = env.int("GARDEN_HSTS_SECONDS", default=31_536_000 if GARDEN_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("GARDEN_HSTS_INCLUDE_SUBDOMAINS", default=GARDEN_HTTPS)
SECURE_HSTS_PRELOAD = env.bool("GARDEN_HSTS_PRELOAD", default=False)
if env.bool("GARDEN_BEHIND_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"
# Preloading a domain into browsers is the operator's decision (hstspreload.org), not a default.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD or not GARDEN_HTTPS else ["security.W021"]

# The dashboard's Content Security Policy (django-csp): scripts and connections from the site
# only; style attributes are allowed (faces carry their colour in one).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
        "base-uri": ["'self'"],
        "object-src": ["'none'"],
    },
}

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Failed sign-ins counted and locked out (the login lockout, below).
    "axes",
    "rest_framework",
    "drf_spectacular",
    "channels",
    "django_celery_beat",
    "garden",
    "groups",
    "operator_messages",
    "missions",
    "telegram_approvals",
    "dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last: turns a locked-out sign-in into the lockout page (429).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

# --- database -------------------------------------------------------------------------------

DATABASE_URL = env.str("DATABASE_URL", default="")
if DATABASE_URL:
    DATABASES = {"default": env.db_url_config(DATABASE_URL)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # No transaction of garden's waits on anything but the database (never a model call
        # or a tool's I/O), so one left open this long belongs to a process that stopped
        # (a paused VM, SIGSTOP): PostgreSQL ends its session, and the row locks it held no
        # longer stall every step that needs them.
        _idle = env.int("GARDEN_DB_IDLE_IN_TRANSACTION_SECONDS", default=30)
        _connect = {"options": f"-c idle_in_transaction_session_timeout={_idle * 1000}"}
        DATABASES["default"]["OPTIONS"] = dict(_connect)
        _pool_max = env.int("GARDEN_DB_POOL_MAX", default=0)
        if _pool_max:
            # psycopg 3 pool: a step hands its connection back before the model call
            # (groups.room.release_connection), so threads waiting on a model call hold
            # none. CONN_MAX_AGE must stay 0 with a pool. Health checks make the pool test a
            # connection before lending it (one round trip): after a database restart or a
            # dropped backend, a dead pooled connection would otherwise fail the next step that
            # takes it, stranding its request until the sweeper.
            DATABASES["default"]["OPTIONS"] = {
                **_connect,
                "pool": {"min_size": 1, "max_size": _pool_max, "timeout": 30},
            }
            DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
        else:
            DATABASES["default"]["CONN_MAX_AGE"] = env.int("GARDEN_DB_CONN_MAX_AGE", default=60)
            DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "garden.sqlite3",
            # IMMEDIATE takes the write lock at BEGIN, so the web process and the embedded
            # worker queue politely instead of failing a lock upgrade mid-transaction.
            "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
            # A file, not shared-cache memory, so worker threads and processes see the test
            # database with real locking; one per process so parallel runs never share it.
            "TEST": {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")},
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- signing in: the login lockout (django-axes) --------------------------------------------
# Every sign-in (/dashboard/login/, /admin/login/, the password a new access token asks for)
# goes through authenticate(); after GARDEN_LOGIN_FAILURE_LIMIT wrong passwords for one
# username, or from one client address, signing in is refused (429 LOGIN_LOCKED, even with
# the right password) until GARDEN_LOGIN_LOCKOUT_MINUTES have passed since the last failure.
# Failures are rows in the database, counted under a row lock, so every web process counts
# together; staff lift a lock in the admin (Access attempts) or with
# `manage.py axes_reset_username NAME`. A success resets the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Trust the TLS proxy's X-Forwarded-For (its last entry) as the client's address; only when
# clients cannot reach garden around the proxy (the same condition as for X-Forwarded-Proto).
GARDEN_BEHIND_PROXY = env.bool("GARDEN_BEHIND_PROXY", default=False)
GARDEN_LOGIN_FAILURE_LIMIT = env.int("GARDEN_LOGIN_FAILURE_LIMIT", default=10)
GARDEN_LOGIN_LOCKOUT_MINUTES = env.int("GARDEN_LOGIN_LOCKOUT_MINUTES", default=15)
AXES_ENABLED = GARDEN_LOGIN_FAILURE_LIMIT > 0
AXES_FAILURE_LIMIT = max(1, GARDEN_LOGIN_FAILURE_LIMIT)
AXES_COOLOFF_TIME = timedelta(minutes=GARDEN_LOGIN_LOCKOUT_MINUTES)
# Either one locks: a username guessed at from many addresses, or one address trying many
# usernames.
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "dashboard.logins.client_ip"
AXES_LOCKOUT_CALLABLE = "dashboard.logins.lockout_response"
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

LOGIN_URL = "admin:login"

# --- Redis, Celery, Channels ----------------------------------------------------------------

REDIS_URL = env.str("REDIS_URL", default="")

if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
else:
    # Server-less transport: a real worker process reads tasks from files under var/
    # (garden/broker.py: kombu's filesystem transport with atomic writes and claims).
    _broker_dir = VAR_DIR / "broker"
    CELERY_BROKER_URL = "filesystem://localhost//"
    CELERY_BROKER_TRANSPORT = "garden.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        "polling_interval": 0.05,
    }

CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# One step makes at most one model call; a retry is another task, its own step. So the limits
# below bound one call plus its tools and writes, never a chain of retries (the retry ceiling,
# GARDEN_PROVIDER_RETRY_*, bounds those). GARDEN_MODEL_CALL_TIMEOUT caps every account's
# timeout; httpx applies it per phase (connect, send, wait for the reply), so one call can
# take up to ~3x it. Each limit derives from the one before unless set explicitly:
#   call timeout < soft limit (4x) < hard limit (+60 s) < lock TTL (+30 s) < sweep-after (+30 s)
# The threads pool does not enforce Celery time limits at all; then the call timeout is what
# ends a step, and the lock TTL still outlives it.
GARDEN_MODEL_CALL_TIMEOUT = env.float("GARDEN_MODEL_CALL_TIMEOUT", default=60.0)
CELERY_TASK_SOFT_TIME_LIMIT = env.int(
    "GARDEN_TASK_SOFT_TIME_LIMIT", default=int(4 * GARDEN_MODEL_CALL_TIMEOUT)
)
CELERY_TASK_TIME_LIMIT = env.int("GARDEN_TASK_TIME_LIMIT", default=CELERY_TASK_SOFT_TIME_LIMIT + 60)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Installed into django-celery-beat's tables when beat starts; editable in the admin.
CELERY_BEAT_SCHEDULE = {
    "groups: sweep stranded requests": {"task": "groups.sweep_requests", "schedule": 60.0},
    # Deleted groups past their minute to undo (a group-list read also asks for it at once).
    "groups: purge deleted groups": {"task": "groups.purge_deleted_groups", "schedule": 30.0},
    # Webhook deliveries whose next attempt is well past (its worker died), and old ones.
    "groups: sweep webhook deliveries": {"task": "groups.sweep_webhooks", "schedule": 60.0},
    "groups: purge webhook deliveries": {"task": "groups.purge_webhooks", "schedule": 3600.0},
}

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # socket_timeout None: a consumer waits on a blocking pop (BZPOPMIN) while its room
            # is quiet, and redis-py 8's default 5 s read timeout would tear every idle
            # websocket down every 5 s (channels_redis#422).
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": None}],
                "prefix": env.str("GARDEN_CHANNELS_PREFIX", default="garden"),
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# The cache holds the API's rate counters: shared through Redis when REDIS_URL is set, so every
# web process counts together.
# The prefix of garden's keys in Redis (cache, call slots): two sites (or test runs) sharing a
# Redis keep apart by it.
GARDEN_CACHE_PREFIX = env.str("GARDEN_CACHE_PREFIX", default="garden")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": GARDEN_CACHE_PREFIX,
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "KEY_PREFIX": GARDEN_CACHE_PREFIX,
        }
    }

# Per-group lock: Redis when REDIS_URL is set, else a local file lock under var/.
GARDEN_LOCK_BACKEND = "redis" if REDIS_URL else "local"
# Longer than a step can live, so a live step never loses its lock (the fence keeps a step
# that does — SIGSTOP, a paused VM — from writing, but its model call would be wasted).
GARDEN_LOCK_TTL_SECONDS = env.int("GARDEN_LOCK_TTL_SECONDS", default=CELERY_TASK_TIME_LIMIT + 30)
# Each worker process writes a beat this often; a site with no beat fresher than the stale
# limit has no live worker (the API and the room say so on a request that waits).
GARDEN_WORKER_BEAT_SECONDS = env.float("GARDEN_WORKER_BEAT_SECONDS", default=10.0)
GARDEN_WORKER_STALE_SECONDS = env.float("GARDEN_WORKER_STALE_SECONDS", default=30.0)
# The sweeper leaves a request alone until it has been quiet longer than a step can live.
GARDEN_SWEEP_AFTER_SECONDS = env.int(
    "GARDEN_SWEEP_AFTER_SECONDS", default=GARDEN_LOCK_TTL_SECONDS + 30
)
if PRODUCTION:
    # Development may shorten the lock on purpose (the fault harness does); production may not.
    check_step_limits(
        (
            GARDEN_MODEL_CALL_TIMEOUT,
            CELERY_TASK_SOFT_TIME_LIMIT,
            CELERY_TASK_TIME_LIMIT,
            GARDEN_LOCK_TTL_SECONDS,
            GARDEN_SWEEP_AFTER_SECONDS,
        )
    )

# --- DRF ------------------------------------------------------------------------------------

REST_FRAMEWORK = {
    # A browser's session (with CSRF), or a personal access token for scripts (garden/api/auth.py).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # DRF's, with the CSRF header checked before any of the body is read.
        "garden.api.auth.SessionAuthentication",
        "garden.api.auth.AccessTokenAuthentication",
    ],
    # An access token does only what its scopes allow (read, write, manage).
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "garden.api.auth.TokenScopes",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "garden.api.errors.exception_handler",
    # JSON only, checked before any view runs (garden/api/parsers.py).
    "DEFAULT_PARSER_CLASSES": ["garden.api.parsers.SafeJSONParser"],
    # Per-owner rates by scope (garden/api/throttles.py; rates in GARDEN_THROTTLE_RATES).
    "DEFAULT_THROTTLE_CLASSES": ["garden.api.throttles.OwnerRateThrottle"],
    "DEFAULT_PAGINATION_CLASS": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "garden API",
    "DESCRIPTION": "Groups of LLM agents in one conversation.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
}

# --- garden ---------------------------------------------------------------------------------

# A 1:1 conversation is bounded before every call like a group room: the newest turns that fit.
GARDEN_CHAT_CAP_CHARS = env.int("GARDEN_CHAT_CAP_CHARS", default=24_000)
GARDEN_CHAT_MAX_TURNS = env.int("GARDEN_CHAT_MAX_TURNS", default=200)
# Turns of group threads each worker process keeps parsed (groups/transcripts.py), so a step
# reads only the turns it has not seen; about 1-2 KiB a turn.
GARDEN_TRANSCRIPT_CACHE_TURNS = env.int("GARDEN_TRANSCRIPT_CACHE_TURNS", default=50_000)
# ... and at most about this many bytes of their text (a thread larger than either is read
# whole, not kept), so a few threads of long turns cannot fill a worker's memory.
GARDEN_TRANSCRIPT_CACHE_BYTES = env.int("GARDEN_TRANSCRIPT_CACHE_BYTES", default=64_000_000)
# Room websockets one person may have open at once in each web process (each holds a consumer
# and a channel-layer subscription); the next is closed with 4429.
GARDEN_MAX_SOCKETS_PER_USER = env.int("GARDEN_MAX_SOCKETS_PER_USER", default=20)
GARDEN_API_MAX_BODY_BYTES = env.int("GARDEN_API_MAX_BODY_BYTES", default=1_000_000)
GARDEN_API_MAX_JSON_DEPTH = env.int("GARDEN_API_MAX_JSON_DEPTH", default=32)
# Files attached to an owner's message (multipart POST …/messages, garden/attachments.py): at
# most this many per message, each at most this many bytes; a body larger than all of them
# together (plus GARDEN_API_MAX_BODY_BYTES for the text) is refused before it is parsed.
GARDEN_MAX_ATTACHMENTS = env.int("GARDEN_MAX_ATTACHMENTS", default=4)
GARDEN_ATTACHMENT_MAX_BYTES = env.int("GARDEN_ATTACHMENT_MAX_BYTES", default=5 * 1024 * 1024)
# All the files one owner has attached, together (they live in the shared database); clearing
# a group's history, or its purge, frees what was attached there.
GARDEN_MAX_ATTACHMENT_BYTES_PER_OWNER = env.int(
    "GARDEN_MAX_ATTACHMENT_BYTES_PER_OWNER", default=200 * 1024 * 1024
)
# Everything one owner keeps in the shared database, together (garden/storage.py): artifacts
# (documents agents write, kept tool outputs, attached files), memory notes and stored turns.
# A tool's write past it is the tool's error (STORAGE_FULL), an owner's message 409.
GARDEN_MAX_STORAGE_BYTES_PER_OWNER = env.int(
    "GARDEN_MAX_STORAGE_BYTES_PER_OWNER", default=200 * 1024 * 1024
)
# The pictures and PDFs of the room passed to a model as content parts, the most recent first;
# older ones (and any the room's cap turned into references) reach it as one-line references.
GARDEN_MAX_INLINE_ATTACHMENTS = env.int("GARDEN_MAX_INLINE_ATTACHMENTS", default=4)
# Django's own upload limits: form fields (not files) held in memory at most this large, and an
# uploaded file kept in memory up to this size and written to a temporary file beyond it.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=2_621_440)
FILE_UPLOAD_MAX_MEMORY_SIZE = env.int("FILE_UPLOAD_MAX_MEMORY_SIZE", default=1_048_576)

GARDEN_RUNTIME_ROOT = Path(env.str("GARDEN_RUNTIME_ROOT", default=str(VAR_DIR / "runtime")))
GARDEN_NAME = env.str("GARDEN_NAME", default="garden")
GARDEN_PROVIDER_RETRY_ATTEMPTS = env.int("GARDEN_PROVIDER_RETRY_ATTEMPTS", default=3)
GARDEN_PROVIDER_RETRY_SECONDS = env.float("GARDEN_PROVIDER_RETRY_SECONDS", default=120.0)
# http.fetch: the whole fetch (every redirect hop, the body) within this many seconds, and at
# most this many bytes of body read.
GARDEN_TOOL_HTTP_TIMEOUT = env.float("GARDEN_TOOL_HTTP_TIMEOUT", default=20.0)
# The account "Test" (one tiny call from the web process) waits at most this long.
GARDEN_ACCOUNT_TEST_TIMEOUT = env.float("GARDEN_ACCOUNT_TEST_TIMEOUT", default=15.0)
GARDEN_TOOL_HTTP_MAX_BYTES = env.int("GARDEN_TOOL_HTTP_MAX_BYTES", default=100_000)
# The tools of one model reply: at most this many run, within this many seconds together (so a
# step is at most one model call plus this; both stay well inside the soft time limit).
GARDEN_MAX_TOOL_CALLS_PER_REPLY = env.int("GARDEN_MAX_TOOL_CALLS_PER_REPLY", default=8)
GARDEN_TOOLS_SECONDS_PER_STEP = env.float(
    "GARDEN_TOOLS_SECONDS_PER_STEP", default=GARDEN_MODEL_CALL_TIMEOUT
)
# A model's reply larger than this is refused unread (a provider's JSON is a few KB to a few MB).
GARDEN_PROVIDER_MAX_REPLY_BYTES = env.int("GARDEN_PROVIDER_MAX_REPLY_BYTES", default=8_000_000)
# A reply is also bounded by what its call asked for (garden/providers/_http.py reply_limit):
# at most max_tokens x GARDEN_REPLY_CHARS_PER_TOKEN characters of text, tool names and
# arguments, plus GARDEN_REPLY_SLACK_CHARS for tool-call JSON (a group step asks for 1,024
# tokens: 24,192 characters), never more than GARDEN_PROVIDER_MAX_REPLY_BYTES. A stream is cut
# there (REPLY_TOO_LARGE, the call counted: the model ran) and not asked again.
GARDEN_REPLY_CHARS_PER_TOKEN = env.int("GARDEN_REPLY_CHARS_PER_TOKEN", default=8)
GARDEN_REPLY_SLACK_CHARS = env.int("GARDEN_REPLY_SLACK_CHARS", default=16_000)
# ... and at most this many bytes on the wire for each of those characters (streamed events
# wrap each token in a few hundred bytes; events with no text count only here): 1.5 MB for a
# group step, never more than GARDEN_PROVIDER_MAX_REPLY_BYTES.
GARDEN_REPLY_WIRE_BYTES_PER_CHAR = env.int("GARDEN_REPLY_WIRE_BYTES_PER_CHAR", default=64)
# A turn keeps at most this many characters of a reply's text in the thread (it is pushed,
# cached and re-sent whole); the rest of a longer one is kept as an artifact the turn refers
# to. Never more than GARDEN_PROVIDER_MAX_REPLY_BYTES.
GARDEN_TURN_MAX_CHARS = min(
    env.int("GARDEN_TURN_MAX_CHARS", default=100_000), GARDEN_PROVIDER_MAX_REPLY_BYTES
)
# The draft of a reply being generated (groups/drafts.py) carries only what is new since the
# last one, and stops after this many characters: the turn lands whole when the call ends.
GARDEN_DRAFT_MAX_CHARS = env.int("GARDEN_DRAFT_MAX_CHARS", default=20_000)

# --- MCP servers -----------------------------------------------------------------------------
# Owners add remote MCP servers (Streamable HTTP; their URLs pass the egress policy, see
# GARDEN_EGRESS_ALLOW_MCP) and enable their tools on agents (docs/tools.md). Each owner has at
# most GARDEN_MAX_MCP_SERVERS_PER_OWNER; a call (or a listing) gives up after
# GARDEN_MCP_TIMEOUT seconds and refuses an answer larger than GARDEN_MCP_MAX_RESULT_BYTES.
GARDEN_MAX_MCP_SERVERS_PER_OWNER = env.int("GARDEN_MAX_MCP_SERVERS_PER_OWNER", default=10)
GARDEN_MCP_TIMEOUT = env.float("GARDEN_MCP_TIMEOUT", default=30.0)
GARDEN_MCP_MAX_RESULT_BYTES = env.int("GARDEN_MCP_MAX_RESULT_BYTES", default=4_000_000)
# Servers the operator offers, like GARDEN_CREDENTIALS: a JSON object of name ->
# {"url": …, "headers": {"Authorization": "env:VAR"}, "users": "*" | [usernames], "groups": […]}
# or, the operator's alone, a local server over stdio: {"command": …, "args": […], "env": {…}}.
GARDEN_MCP_SERVERS = (
    env.json("GARDEN_MCP_SERVERS") if env.str("GARDEN_MCP_SERVERS", default="").strip() else {}
)

# --- webhooks (groups/services/webhooks.py, docs/webhooks.md) --------------------------------
# An owner has at most GARDEN_MAX_WEBHOOKS_PER_OWNER endpoints. A delivery is tried at most
# GARDEN_WEBHOOK_MAX_ATTEMPTS times within GARDEN_WEBHOOK_RETRY_SECONDS of its event, after the
# pauses of GARDEN_WEBHOOK_BACKOFF (seconds; the last repeats); each try ends within
# GARDEN_WEBHOOK_TIMEOUT. An endpoint whose last GARDEN_WEBHOOK_DISABLE_AFTER deliveries all
# gave up is disabled. Finished deliveries are kept GARDEN_WEBHOOK_KEEP_DAYS days. One owner's
# tries hold at most GARDEN_MAX_WEBHOOKS_IN_FLIGHT_PER_OWNER worker threads at once (each up to
# GARDEN_WEBHOOK_TIMEOUT); a further try sends nothing and comes back when a slot frees. Values
# out of range stop start-up (garden.E012).
GARDEN_MAX_WEBHOOKS_PER_OWNER = env.int("GARDEN_MAX_WEBHOOKS_PER_OWNER", default=10)
GARDEN_MAX_WEBHOOKS_IN_FLIGHT_PER_OWNER = env.int(
    "GARDEN_MAX_WEBHOOKS_IN_FLIGHT_PER_OWNER", default=2
)
GARDEN_WEBHOOK_TIMEOUT = env.float("GARDEN_WEBHOOK_TIMEOUT", default=10.0)
GARDEN_WEBHOOK_BACKOFF = [
    float(s)
    for s in env.list("GARDEN_WEBHOOK_BACKOFF", default=["5", "30", "120", "600", "1800", "3600"])
]
GARDEN_WEBHOOK_RETRY_SECONDS = env.float("GARDEN_WEBHOOK_RETRY_SECONDS", default=6 * 3600.0)
GARDEN_WEBHOOK_MAX_ATTEMPTS = env.int("GARDEN_WEBHOOK_MAX_ATTEMPTS", default=10)
GARDEN_WEBHOOK_DISABLE_AFTER = env.int("GARDEN_WEBHOOK_DISABLE_AFTER", default=5)
GARDEN_WEBHOOK_KEEP_DAYS = env.int("GARDEN_WEBHOOK_KEEP_DAYS", default=14)

# --- egress ---------------------------------------------------------------------------------
# Outbound requests an owner can direct (a model account's base URL, http.fetch) never reach
# loopback, private, link-local, unique-local, multicast or metadata addresses, except the
# hosts and networks named here (comma-separated: "10.0.0.0/8,ollama.internal,*.corp.example").
# GARDEN_EGRESS_ALLOW applies to both; GARDEN_EGRESS_ALLOW_PROVIDERS to model accounts only
# (a local Ollama or vLLM), so tools cannot reach them.
GARDEN_EGRESS_ALLOW = env.list("GARDEN_EGRESS_ALLOW", default=[])
GARDEN_EGRESS_ALLOW_PROVIDERS = env.list("GARDEN_EGRESS_ALLOW_PROVIDERS", default=[])
# The same for the Telegram Bot API only (a self-hosted Bot API server on the private network).
GARDEN_EGRESS_ALLOW_TELEGRAM = env.list("GARDEN_EGRESS_ALLOW_TELEGRAM", default=[])
# The same for owners' MCP servers only (an MCP server on the private network that owners may
# add, without opening it to http.fetch).
GARDEN_EGRESS_ALLOW_MCP = env.list("GARDEN_EGRESS_ALLOW_MCP", default=[])
# The same for owners' webhook endpoints only (a receiver on the private network).
GARDEN_EGRESS_ALLOW_WEBHOOK = env.list("GARDEN_EGRESS_ALLOW_WEBHOOK", default=[])
# Name lookups (garden/egress/resolver.py): each runs on a thread of its own, at most
# GARDEN_EGRESS_DNS_PER_OWNER at once for one owner and one purpose, and at most the pool of
# its purpose per process, so a name that never answers costs only the owner who named it and
# tool lookups never take the capacity model calls and the Bot API need. A lookup gives up
# after GARDEN_EGRESS_DNS_TIMEOUT seconds (or the request's own deadline, if sooner).
GARDEN_EGRESS_DNS_TIMEOUT = env.float("GARDEN_EGRESS_DNS_TIMEOUT", default=5.0)
GARDEN_EGRESS_DNS_PER_OWNER = env.int("GARDEN_EGRESS_DNS_PER_OWNER", default=4)
GARDEN_EGRESS_DNS_PROVIDER_THREADS = env.int("GARDEN_EGRESS_DNS_PROVIDER_THREADS", default=32)
GARDEN_EGRESS_DNS_TOOL_THREADS = env.int("GARDEN_EGRESS_DNS_TOOL_THREADS", default=16)
GARDEN_EGRESS_DNS_TELEGRAM_THREADS = env.int("GARDEN_EGRESS_DNS_TELEGRAM_THREADS", default=4)

# --- Telegram approvals (telegram_approvals/, docs/telegram.md) ------------------------------
# Unset token: no Telegram surface (the dashboard page says so, the webhook answers 404).
# The token is a secret: it is never logged (telegram_approvals.bot redacts it) nor returned.
GARDEN_TELEGRAM_BOT_TOKEN = env.str("GARDEN_TELEGRAM_BOT_TOKEN", default="")
# Telegram sends it back in X-Telegram-Bot-Api-Secret-Token on every webhook update; unset,
# the webhook refuses every update (polling with `manage.py telegram_poll` needs none).
GARDEN_TELEGRAM_WEBHOOK_SECRET = env.str("GARDEN_TELEGRAM_WEBHOOK_SECRET", default="")
# The Bot API's base URL (a self-hosted Bot API server, or a test's); it passes the egress
# policy like any other destination.
GARDEN_TELEGRAM_API_URL = env.str("GARDEN_TELEGRAM_API_URL", default="https://api.telegram.org")
# Shown on the link page ("send /start <code> to @name"); unset, it is asked of getMe once.
GARDEN_TELEGRAM_BOT_USERNAME = env.str("GARDEN_TELEGRAM_BOT_USERNAME", default="")
# How long a link code from the dashboard stays good.
GARDEN_TELEGRAM_LINK_CODE_SECONDS = env.int("GARDEN_TELEGRAM_LINK_CODE_SECONDS", default=600)
# Every Bot API call (send, edit, answer) finishes within this many seconds.
GARDEN_TELEGRAM_TIMEOUT = env.float("GARDEN_TELEGRAM_TIMEOUT", default=15.0)


# --- fair share: quotas and limits per owner --------------------------------------------------
# API requests per signed-in person ("N/sec|min|hour|day"); empty turns a scope off.
GARDEN_THROTTLE_RATES = {
    "read": env.str("GARDEN_THROTTLE_READ", default="600/min"),
    "write": env.str("GARDEN_THROTTLE_WRITE", default="120/min"),
    "messages": env.str("GARDEN_THROTTLE_MESSAGES", default="30/min"),
}
# Scripted accounts are a development and demo tool: ordinary users may create them only where
# this is on (staff always may, in the admin).
# The dashboard's one-click starter team answers from offline scripts: each answer takes this
# long, written in pieces, so a first user can watch who works (`make demo` is not paced).
GARDEN_STARTER_PACE_SECONDS = env.float("GARDEN_STARTER_PACE_SECONDS", default=1.0)
GARDEN_ALLOW_SCRIPTED_ACCOUNTS = env.bool("GARDEN_ALLOW_SCRIPTED_ACCOUNTS", default=not PRODUCTION)
GARDEN_MAX_QUEUED_PER_GROUP = env.int("GARDEN_MAX_QUEUED_PER_GROUP", default=10)
GARDEN_MAX_QUEUED_PER_OWNER = env.int("GARDEN_MAX_QUEUED_PER_OWNER", default=30)
GARDEN_MAX_GROUPS_PER_OWNER = env.int("GARDEN_MAX_GROUPS_PER_OWNER", default=50)
# One page of a room's transcript (GET …/messages) carries at most this many characters of
# turns (and at most 500 turns); the page after it is one request away.
GARDEN_ROOM_PAGE_CHARS = env.int("GARDEN_ROOM_PAGE_CHARS", default=2_000_000)
# The largest room cap an owner may set on a group (characters of the room sent per call):
# every member turn re-sends the room, so the cap is also a cost the operator bounds.
GARDEN_MAX_ROOM_CAP_CHARS = env.int("GARDEN_MAX_ROOM_CAP_CHARS", default=400_000)
GARDEN_MAX_AGENTS_PER_OWNER = env.int("GARDEN_MAX_AGENTS_PER_OWNER", default=100)
GARDEN_MAX_MODEL_ACCOUNTS_PER_OWNER = env.int("GARDEN_MAX_MODEL_ACCOUNTS_PER_OWNER", default=20)
GARDEN_MAX_TOKENS_PER_OWNER = env.int("GARDEN_MAX_TOKENS_PER_OWNER", default=20)
# Every access token expires: after the days its owner chose, at most GARDEN_TOKEN_MAX_DAYS,
# or GARDEN_TOKEN_DEFAULT_DAYS when they chose none. Making one needs the current password.
GARDEN_TOKEN_DEFAULT_DAYS = env.int("GARDEN_TOKEN_DEFAULT_DAYS", default=90)
GARDEN_TOKEN_MAX_DAYS = env.int("GARDEN_TOKEN_MAX_DAYS", default=366)
GARDEN_MAX_MISSIONS_PER_OWNER = env.int("GARDEN_MAX_MISSIONS_PER_OWNER", default=20)
GARDEN_MIN_MISSION_INTERVAL_SECONDS = env.int(
    "GARDEN_MIN_MISSION_INTERVAL_SECONDS", default=300 if PRODUCTION else 60
)
# Model calls one owner may have in flight across every worker (Redis-backed with REDIS_URL);
# further steps of that owner wait, re-checking every GARDEN_CALL_SLOT_RETRY_SECONDS, while
# other owners' steps run.
GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER = env.int("GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER", default=4)
GARDEN_CALL_SLOT_RETRY_SECONDS = env.float("GARDEN_CALL_SLOT_RETRY_SECONDS", default=1.0)
# A step that finds no free slot looks again after a pause that grows (doubling, jittered)
# from GARDEN_CALL_SLOT_RETRY_SECONDS up to this; it writes and projects nothing meanwhile.
GARDEN_SLOT_RETRY_MAX_SECONDS = env.float("GARDEN_SLOT_RETRY_MAX_SECONDS", default=10.0)
# Replies whose tools one owner may have running at once across every worker (each holds a
# worker thread for up to GARDEN_TOOLS_SECONDS_PER_STEP); further ones wait, their reply
# recorded, and run their tools when a slot frees, while other owners' steps run.
GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER = env.int("GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER", default=2)
# Tokens (input + output, as providers count them) one owner's calls may spend on each of the
# operator's credentials (GARDEN_CREDENTIALS) per minute and per UTC day; 0 is unlimited. A
# staff member sets an owner's own in the admin (Token budgets). Past the minute's, a call
# waits for the next minute (waiting_for: "token_budget"); past the day's, it is not made
# (TOKEN_BUDGET_SPENT: a group request ends, a member's turn is skipped, a 1:1 reply is a
# notice). Owners' own keys are not counted.
GARDEN_TOKEN_BUDGET_PER_MINUTE = env.int("GARDEN_TOKEN_BUDGET_PER_MINUTE", default=200_000)
GARDEN_TOKEN_BUDGET_PER_DAY = env.int("GARDEN_TOKEN_BUDGET_PER_DAY", default=5_000_000)
# What calls cost (garden/pricing.py, docs/operations.md "Costs"): the genai-prices table
# bundled with the installed package, under these overrides for self-hosted or negotiated
# models, which win over it. A JSON object of model (or "openai/<model>", "anthropic/<model>")
# -> dollars per million tokens: {"llama3.1:8b": {"input_per_mtok": "0", "output_per_mtok":
# "0"}, "gpt-4o": {"input_per_mtok": "2.0", "output_per_mtok": "8.0"}}. Checked at start-up
# (garden.E011). A model in neither is recorded as unpriced, never as free.
GARDEN_MODEL_PRICES = (
    env.json("GARDEN_MODEL_PRICES") if env.str("GARDEN_MODEL_PRICES", default="").strip() else {}
)


# --- model-account keys ---------------------------------------------------------------------
# The operator's named credentials (JSON): which key, for which provider and base URL, for whom.
#   {"openai": {"provider": "openai", "env": "OPENAI_API_KEY", "users": "*"},
#    "team-claude": {"provider": "anthropic", "file": "/run/secrets/anthropic",
#                    "groups": ["research"]}}
# An account using one sends its key only to the credential's base_url (default: the
# provider's public API). Owners never name an environment variable.
GARDEN_CREDENTIALS = (
    env.json("GARDEN_CREDENTIALS") if env.str("GARDEN_CREDENTIALS", default="").strip() else {}
)
# Fernet keys (comma-separated, `python -c "from cryptography.fernet import Fernet;
# print(Fernet.generate_key().decode())"`) for the keys owners paste: the first encrypts,
# all decrypt; put a new key first and run `manage.py rotate_api_keys` to rotate. Unset in
# development, a key derived from SECRET_KEY is used; unset in production, pasting is refused.
GARDEN_FERNET_KEYS = env.list("GARDEN_FERNET_KEYS", default=[])
check_egress_and_keys(globals())

# --- metrics (Prometheus; docs/operations.md, "Metrics") -------------------------------------
# Off unless one of the first three is set. GARDEN_METRICS_TOKEN: the bearer secret /metrics asks
# for (unset: /metrics is 404). GARDEN_METRICS_DIR (or PROMETHEUS_MULTIPROC_DIR): a directory the
# processes of one host (one container) share, so one scrape adds them all up. GARDEN_METRICS_PORT:
# a worker also serves its host's samples on this port (on GARDEN_METRICS_ADDR), for a host with
# no web process. GARDEN_METRICS_MAX_MODELS: distinct model names a process labels before
# counting the rest as "other" (owners name models, so their number is bounded here).
GARDEN_METRICS_TOKEN = env.str("GARDEN_METRICS_TOKEN", default="")
GARDEN_METRICS_DIR = env.str(
    "GARDEN_METRICS_DIR", default=env.str("PROMETHEUS_MULTIPROC_DIR", default="")
)
GARDEN_METRICS_PORT = env.int("GARDEN_METRICS_PORT", default=0)
GARDEN_METRICS_ADDR = env.str("GARDEN_METRICS_ADDR", default="127.0.0.1")
GARDEN_METRICS_MAX_MODELS = env.int("GARDEN_METRICS_MAX_MODELS", default=100)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("GARDEN_LOG_LEVEL", default="WARNING")},
}
