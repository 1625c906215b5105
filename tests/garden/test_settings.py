"""Settings come from environment variables alone; production refuses to start without a key."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

PROBE = (
    "import django, json; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'db': s.DATABASES['default']['ENGINE'], 'broker': s.CELERY_BROKER_URL, "
    "'layer': s.CHANNEL_LAYERS['default']['BACKEND'], 'lock': s.GARDEN_LOCK_BACKEND, "
    "'acks_late': s.CELERY_TASK_ACKS_LATE, 'reject': s.CELERY_TASK_REJECT_ON_WORKER_LOST, "
    "'prefetch': s.CELERY_WORKER_PREFETCH_MULTIPLIER, 'serializer': s.CELERY_TASK_SERIALIZER, "
    "'limit': s.CELERY_TASK_TIME_LIMIT}))"
)


def probe(var_dir, code=PROBE, **env):
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY", "GARDEN_ENV"}
    }
    base.update({"DJANGO_SETTINGS_MODULE": "config.settings", "GARDEN_VAR_DIR": str(var_dir)})
    base.update(env)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_embedded_default_needs_no_services(tmp_path):
    out = probe(tmp_path)
    assert out.returncode == 0, out.stderr
    cfg = json.loads(out.stdout)
    assert cfg["db"] == "django.db.backends.sqlite3"
    assert cfg["broker"].startswith("filesystem://")
    assert cfg["layer"] == "channels.layers.InMemoryChannelLayer"
    assert cfg["lock"] == "local"
    assert (cfg["acks_late"], cfg["reject"], cfg["prefetch"], cfg["serializer"]) == (
        True,
        True,
        1,
        "json",
    )
    assert cfg["limit"] > 0


def test_urls_switch_to_postgres_and_redis(tmp_path):
    out = probe(
        tmp_path, DATABASE_URL="postgres://u@db:5432/garden", REDIS_URL="redis://cache:6379/0"
    )
    assert out.returncode == 0, out.stderr
    cfg = json.loads(out.stdout)
    assert cfg["db"] == "django.db.backends.postgresql"
    assert cfg["broker"] == "redis://cache:6379/0"
    assert cfg["layer"] == "channels_redis.core.RedisChannelLayer"
    assert cfg["lock"] == "redis"


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    out = probe(tmp_path, GARDEN_ENV="production")
    assert out.returncode != 0
    assert "DJANGO_SECRET_KEY is not set" in out.stderr


def test_production_starts_with_a_secret_key(tmp_path):
    out = probe(tmp_path, GARDEN_ENV="production", DJANGO_SECRET_KEY="x" * 50)
    assert out.returncode == 0, out.stderr


IMPORT_ONLY = "import config.settings as s; print(s.SECRET_KEY)"


def test_importing_the_settings_writes_nothing(tmp_path):
    var = tmp_path / "var"
    first, second = probe(var, IMPORT_ONLY), probe(var, IMPORT_ONLY)
    assert first.returncode == 0, first.stderr
    assert list(tmp_path.iterdir()) == []
    # Every process of a checkout derives the same development key, none writing it.
    assert first.stdout == second.stdout and len(first.stdout.strip()) >= 50
    assert probe(tmp_path / "elsewhere", IMPORT_ONLY).stdout != first.stdout


def test_a_kept_development_key_is_read(tmp_path):
    (tmp_path / "secret_key").write_text("kept-from-an-earlier-checkout\n")
    out = probe(tmp_path, IMPORT_ONLY)
    assert out.stdout.strip() == "kept-from-an-earlier-checkout", out.stderr


def test_django_setup_makes_var_and_the_embedded_broker_folders(tmp_path):
    var = tmp_path / "fresh" / "var"
    out = probe(var)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (var / "broker").iterdir()) == ["control", "processed", "queue"]


@pytest.mark.postgres
@pytest.mark.django_db
def test_suite_runs_on_postgresql_when_services_are_required():
    assert connection.vendor == "postgresql"
    with connection.cursor() as cur:
        cur.execute("select version()")
        assert cur.fetchone()[0].startswith("PostgreSQL")


def test_check_deploy_is_clean_in_production(tmp_path):
    """``manage.py check --deploy`` under GARDEN_ENV=production, configured as the README's
    Security model says, reports nothing at WARNING or above."""
    from cryptography.fernet import Fernet

    base = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {
            "DATABASE_URL",
            "REDIS_URL",
            "DJANGO_SECRET_KEY",
            "GARDEN_ENV",
            "DJANGO_DEBUG",
            "GARDEN_ALLOW_SCRIPTED_ACCOUNTS",
        }
    }
    base.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "GARDEN_VAR_DIR": str(tmp_path),
            "GARDEN_ENV": "production",
            "DJANGO_SECRET_KEY": Fernet.generate_key().decode() * 2,
            "DJANGO_ALLOWED_HOSTS": "garden.example.com",
            "GARDEN_FERNET_KEYS": Fernet.generate_key().decode(),
        }
    )
    out = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no issues" in out.stdout, out.stdout
    # Left unconfigured, the same check names what is missing.
    del base["GARDEN_FERNET_KEYS"]
    out = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "garden.W001" in out.stdout + out.stderr


def test_production_settings_protect_the_session(tmp_path):
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
        "s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS > 0, s.DEBUG, "
        "s.GARDEN_ALLOW_SCRIPTED_ACCOUNTS, getattr(s, 'SECURE_PROXY_SSL_HEADER', None)]))"
    )
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_DEBUG", "GARDEN_ENV"}}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "GARDEN_VAR_DIR": str(tmp_path),
            "GARDEN_ENV": "production",
            "DJANGO_SECRET_KEY": "k" * 60,
        }
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert json.loads(run.stdout) == [True, True, True, True, False, False, None], run.stderr
    env["GARDEN_BEHIND_PROXY"] = "1"
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert json.loads(run.stdout)[-1] == ["HTTP_X_FORWARDED_PROTO", "https"], run.stderr


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_transaction_left_open_by_a_stopped_process_is_ended_by_postgresql(tmp_path):
    """Every PostgreSQL session asks for idle_in_transaction_session_timeout, so a worker
    paused inside a transaction (a frozen VM, SIGSTOP) cannot hold its row locks for ever."""
    if connection.vendor != "postgresql":
        pytest.skip("the session setting is PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute("show idle_in_transaction_session_timeout")
        assert cursor.fetchone()[0] == "30s"
    out = probe(
        tmp_path,
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.DATABASES['default']['OPTIONS']['options'])",
        DATABASE_URL="postgres://u@db:5432/garden",
        GARDEN_DB_POOL_MAX="4",
        GARDEN_DB_IDLE_IN_TRANSACTION_SECONDS="5",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "-c idle_in_transaction_session_timeout=5000"


WINDOW = (
    "import json, django; from django.conf import settings as s; "
    "print(json.dumps([s.GARDEN_STEP_CONTINUE_SECONDS, s.CELERY_TASK_SOFT_TIME_LIMIT]))"
)


def test_a_delivery_goes_on_in_place_only_within_its_soft_limit(tmp_path):
    """By default the soft limit leaves room for four calls' worth of a step after the window;
    one set lower shortens the window to fit, down to none (every step its own delivery)."""
    by_default = json.loads(probe(tmp_path, code=WINDOW, GARDEN_MODEL_CALL_TIMEOUT="30").stdout)
    assert by_default == [30.0, 150]
    shorter = probe(
        tmp_path, code=WINDOW, GARDEN_MODEL_CALL_TIMEOUT="30", GARDEN_TASK_SOFT_TIME_LIMIT="130"
    )
    assert json.loads(shorter.stdout) == [10.0, 130]
    none_left = probe(
        tmp_path, code=WINDOW, GARDEN_MODEL_CALL_TIMEOUT="30", GARDEN_TASK_SOFT_TIME_LIMIT="100"
    )
    assert json.loads(none_left.stdout) == [0.0, 100]
