"""garden settings, chosen by environment variables alone.

Unset, everything is embedded: SQLite under var/, an in-memory channel layer, a local lock
and a Celery worker on a server-less filesystem transport. DATABASE_URL switches to
PostgreSQL; REDIS_URL switches the broker, the per-group lock and the channel layer to Redis.
Importing this module only reads: the folders it names under var/ are made when Django starts
(garden.apps). The environment is read in config/env.py; the browser protections and the login
lockout are in config/web_security.py, garden's own settings (GARDEN_*) in
config/garden_settings.py, all of them imported here.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

# The checkout's folder and the environment's name are settings too (settings.BASE_DIR).
from config.env import BASE_DIR as BASE_DIR
from config.env import GARDEN_ENV as GARDEN_ENV
from config.env import PRODUCTION, VAR_DIR, env
from config.garden_settings import *  # noqa: F403
from config.redis import redis_config
from config.validation import check_step_limits, secret_key
from config.web_security import *  # noqa: F403

SECRET_KEY = secret_key(
    configured=env.str("DJANGO_SECRET_KEY", default=""), production=PRODUCTION, var_dir=VAR_DIR
)
DEBUG = env.bool("DJANGO_DEBUG", default=not PRODUCTION)
# Every event checked against its registered serializer as it is sent (garden/event_schema.py):
# a payload field without its serializer fails where it is sent. On in development and tests.
GARDEN_CHECK_EVENTS = env.bool("GARDEN_CHECK_EVENTS", default=DEBUG)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=[] if PRODUCTION else ["*"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

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
    "notifications",
    "dashboard",
]

# How long each /readyz check (database, Redis, broker, migrations) may take.
GARDEN_PROBE_TIMEOUT_SECONDS = env.float("GARDEN_PROBE_TIMEOUT_SECONDS", default=2.0)
# /readyz asks no credentials: its checks run at most once per this many seconds per process,
# and every probe meanwhile is answered from the last ones (a flood opens no connections).
GARDEN_PROBE_CACHE_SECONDS = env.float("GARDEN_PROBE_CACHE_SECONDS", default=1.0)

MIDDLEWARE = [
    # First: hands the view thread's database connections back (garden/db_release.py).
    "garden.db_release.DbReleaseMiddleware",
    # Every response, a probe's and an error's too, says its X-Request-ID; every log line and
    # task sent while serving it carries the id; one access line each (garden/request_ids.py).
    "garden.request_ids.RequestIdMiddleware",
    # /healthz and /readyz, answered before the Host check and the HTTPS redirect, so probes
    # and scrapes reach them by pod IP over plain HTTP (garden/probes.py).
    "garden.probes.ProbeMiddleware",
    # Redis or the broker away for a moment: a JSON 503, never the HTML error page.
    "garden.unavailable.UnavailableMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Slowed usernames answered before their password is checked; device cookies handed out.
    "dashboard.logins.SignInMiddleware",
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
GARDEN_DB_IDLE_IN_TRANSACTION_SECONDS = env.int("GARDEN_DB_IDLE_IN_TRANSACTION_SECONDS", default=30)
GARDEN_DB_TRANSACTION_POOLER = env.bool("GARDEN_DB_TRANSACTION_POOLER", default=False)
if DATABASE_URL:
    DATABASES = {"default": env.db_url_config(DATABASE_URL)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # No transaction of garden's waits on anything but the database (never a model call
        # or a tool's I/O), so one left open this long belongs to a process that stopped
        # (a paused VM, SIGSTOP): PostgreSQL ends its session, and the row locks it held no
        # longer stall every step that needs them.
        _idle = GARDEN_DB_IDLE_IN_TRANSACTION_SECONDS
        # Behind a pooler in transaction mode (PgBouncer, RDS Proxy, Supabase's, Azure's), a
        # session is not the client's: no startup options (PgBouncer refuses the connection),
        # no server-side cursors (.iterator() would open one in a transaction the next query
        # may not share) and no prepared statements. The idle timeout is then the role's or the
        # database's (ALTER ROLE … SET idle_in_transaction_session_timeout), and the pooler's
        # idle_transaction_timeout; garden.W009 says when the server's is off or longer.
        if GARDEN_DB_TRANSACTION_POOLER:
            _connect = {"prepare_threshold": None}
            DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
        else:
            _connect = {"options": f"-c idle_in_transaction_session_timeout={_idle * 1000}"}
        DATABASES["default"]["OPTIONS"] = dict(_connect)
        _pool_max = env.int("GARDEN_DB_POOL_MAX", default=0)
        if _pool_max:
            # psycopg 3 pool: a step hands its connection back before the model call
            # (groups.loop.room.release_connection), so threads waiting on a model call hold
            # none. CONN_MAX_AGE must stay 0 with a pool. Health checks make the pool test a
            # connection before lending it (one round trip): after a database restart or a
            # dropped backend, a dead pooled connection would otherwise fail the next step that
            # takes it, stranding its request until the sweeper.
            DATABASES["default"]["OPTIONS"] = {
                **_connect,
                "pool": {
                    "min_size": 1,
                    "max_size": _pool_max,
                    # How long a thread waits for a free connection before failing.
                    "timeout": env.float("GARDEN_DB_POOL_TIMEOUT", default=30.0),
                },
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

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

LOGIN_URL = "admin:login"

# --- Redis, Celery, Channels ----------------------------------------------------------------

# Every Redis client (broker, cache, locks and slots, channel layer, /readyz) is built from this
# one configuration: REDIS_URL, or Sentinels and a master's name, TLS always verified
# (config/redis.py). None: the embedded default, no Redis.
GARDEN_REDIS = redis_config(env)
REDIS_URL = GARDEN_REDIS.url if GARDEN_REDIS else ""

if GARDEN_REDIS:
    CELERY_BROKER_URL = GARDEN_REDIS.broker_url()
    # The broker's own transport: kombu's, with a worker that outlives a broker restart
    # (garden/broker_redis.py).
    CELERY_BROKER_TRANSPORT = "garden.broker_redis:" + (
        "SentinelTransport" if GARDEN_REDIS.sentinels else "Transport"
    )
    CELERY_BROKER_TRANSPORT_OPTIONS = GARDEN_REDIS.broker_transport_options()
    CELERY_BROKER_USE_SSL = GARDEN_REDIS.broker_use_ssl()
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
#   call timeout < soft limit (4x + the continue window) < hard limit (+60 s) < lock TTL (+30 s) < sweep-after (+30 s)
# The threads pool does not enforce Celery time limits at all; then the call timeout is what
# ends a step, and the lock TTL still outlives it.
GARDEN_MODEL_CALL_TIMEOUT = env.float("GARDEN_MODEL_CALL_TIMEOUT", default=60.0)
# A delivery that completes a step of a request may run the request's next step itself,
# holding the group's lock (extended), instead of sending it to the broker: at most
# GARDEN_STEPS_PER_DELIVERY steps, and it starts another only while it has run for less than
# GARDEN_STEP_CONTINUE_SECONDS (so a delivery lasts at most that plus one step, within the soft
# limit below). 1 turns it off: every step its own delivery.
GARDEN_STEPS_PER_DELIVERY = env.int("GARDEN_STEPS_PER_DELIVERY", default=24)
GARDEN_STEP_CONTINUE_SECONDS = env.float(
    "GARDEN_STEP_CONTINUE_SECONDS", default=GARDEN_MODEL_CALL_TIMEOUT
)
CELERY_TASK_SOFT_TIME_LIMIT = env.int(
    "GARDEN_TASK_SOFT_TIME_LIMIT",
    default=int(4 * GARDEN_MODEL_CALL_TIMEOUT + GARDEN_STEP_CONTINUE_SECONDS),
)
CELERY_TASK_TIME_LIMIT = env.int("GARDEN_TASK_TIME_LIMIT", default=CELERY_TASK_SOFT_TIME_LIMIT + 60)
# A soft limit set below four calls and the window shortens the window to fit (none left: every
# step is its own delivery), so a delivery never runs into its soft limit.
GARDEN_STEP_CONTINUE_SECONDS = min(
    GARDEN_STEP_CONTINUE_SECONDS,
    max(0.0, CELERY_TASK_SOFT_TIME_LIMIT - 4 * GARDEN_MODEL_CALL_TIMEOUT),
)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = False
# django-celery-beat's DatabaseScheduler that sends only while it holds the beat lease, so one
# beat sends the schedule however many run (garden/beat.py). A beat that dies holds the lease
# for GARDEN_BEAT_LEASE_SECONDS at most; each beat asks for it every GARDEN_BEAT_RENEW_SECONDS.
CELERY_BEAT_SCHEDULER = "garden.beat:LeasedScheduler"
GARDEN_BEAT_LEASE_SECONDS = env.float("GARDEN_BEAT_LEASE_SECONDS", default=30.0)
GARDEN_BEAT_RENEW_SECONDS = env.float(
    "GARDEN_BEAT_RENEW_SECONDS", default=GARDEN_BEAT_LEASE_SECONDS / 3
)
# Installed into django-celery-beat's tables when beat starts; editable in the admin.
CELERY_BEAT_SCHEDULE = {
    "groups: sweep stranded requests": {"task": "groups.sweep_requests", "schedule": 60.0},
    # Deleted groups past their minute to undo (a group-list read also asks for it at once).
    "groups: purge deleted groups": {"task": "groups.purge_deleted_groups", "schedule": 30.0},
    # Webhook deliveries whose next attempt is well past (its worker died), and old ones.
    "groups: sweep webhook deliveries": {"task": "groups.sweep_webhooks", "schedule": 60.0},
    "groups: purge webhook deliveries": {"task": "groups.purge_webhooks", "schedule": 3600.0},
}

if GARDEN_REDIS:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [GARDEN_REDIS.channel_host()],
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
# Live events a process sends to the channel layer at once (the rest wait their turn), and so
# about the connections it holds to the layer for sending.
GARDEN_EVENT_PUSHES_IN_FLIGHT = env.int("GARDEN_EVENT_PUSHES_IN_FLIGHT", default=8)
# Connections each process opens to Redis for its locks and slots, and for the cache: at most
# this many each, however many threads a worker runs (a thread waits for a free one).
GARDEN_REDIS_MAX_CONNECTIONS = env.int("GARDEN_REDIS_MAX_CONNECTIONS", default=16)
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": GARDEN_CACHE_PREFIX,
            "OPTIONS": {
                # One pool per process for every thread's cache backend (garden/redis_conn.py).
                "pool_class": "garden.redis_conn.SharedConnectionPool",
                "max_connections": GARDEN_REDIS_MAX_CONNECTIONS,
                "timeout": 5,
            },
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
# A task the broker did not take (Redis restarting or failing over) is sent again this often
# until it does (garden/lost_sends.py); each worker's beat also notices a Redis that restarted
# empty and sends again what waited in it.
GARDEN_RESEND_SECONDS = env.float("GARDEN_RESEND_SECONDS", default=2.0)
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

# The tools of one model reply: at most this many run, within this many seconds together (so a
# step is at most one model call plus this; both stay well inside the soft time limit).
GARDEN_MAX_TOOL_CALLS_PER_REPLY = env.int("GARDEN_MAX_TOOL_CALLS_PER_REPLY", default=8)
GARDEN_TOOLS_SECONDS_PER_STEP = env.float(
    "GARDEN_TOOLS_SECONDS_PER_STEP", default=GARDEN_MODEL_CALL_TIMEOUT
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

# ``text`` (time, level, logger, context, message) or ``json`` (one object a line); every
# line carries the process's role, the request id, and the trace and span ids while a span is
# current (garden/log_format.py). Celery's own handlers get the same (config/celery.py).
GARDEN_LOG_FORMAT = env.str("GARDEN_LOG_FORMAT", default="text").strip().lower()
if GARDEN_LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"GARDEN_LOG_FORMAT is text or json, not {GARDEN_LOG_FORMAT!r}")
# One line per HTTP request on the garden.access logger, at INFO whatever GARDEN_LOG_LEVEL is
# (garden/request_ids.py).
GARDEN_ACCESS_LOG = env.bool("GARDEN_ACCESS_LOG", default=True)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Past GARDEN_LOG_REPEAT_LIMIT records a minute from one line of code, the rest are left
    # out and one line says how many (garden/logs.py): a server's junk answer makes the MCP
    # SDK warn once per bad event.
    "filters": {
        "repeats": {
            "()": "garden.logs.RepeatFilter",
            "limit": env.int("GARDEN_LOG_REPEAT_LIMIT", default=20),
            "window": 60.0,
        },
        "context": {"()": "garden.log_format.ContextFilter"},
    },
    "formatters": {"garden": {"()": "garden.log_format.formatter", "name": GARDEN_LOG_FORMAT}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["repeats", "context"],
            "formatter": "garden",
        }
    },
    "loggers": {
        "garden.access": {"level": "INFO" if GARDEN_ACCESS_LOG else "WARNING"},
        # Django's own handlers (a plain console while DEBUG, runserver's lines) give way to
        # the console's lines: one format on stderr.
        "django": {"handlers": []},
        "django.server": {"handlers": ["console"], "propagate": False},
    },
    "root": {"handlers": ["console"], "level": env.str("GARDEN_LOG_LEVEL", default="WARNING")},
}
# dictConfig, then Python's warnings become log lines too (py.warnings).
LOGGING_CONFIG = "garden.log_format.configure"

# Errors to Sentry, scrubbed of every text an owner wrote and of keys and tokens
# (garden/sentry.py); unset, the SDK is never loaded.
SENTRY_DSN = env.str("SENTRY_DSN", default="")
if SENTRY_DSN:
    from garden import sentry

    sentry.start(
        dsn=SENTRY_DSN,
        environment=env.str("SENTRY_ENVIRONMENT", default=GARDEN_ENV),
        release=env.str("SENTRY_RELEASE", default=""),
    )
