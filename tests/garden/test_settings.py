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


def probe(tmp_path, **env):
    base = {k: v for k, v in os.environ.items()
            if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY", "GARDEN_ENV"}}
    base.update({"DJANGO_SETTINGS_MODULE": "config.settings", "GARDEN_VAR_DIR": str(tmp_path)})
    base.update(env)
    return subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=base,
                          capture_output=True, text=True, timeout=60)


def test_embedded_default_needs_no_services(tmp_path):
    out = probe(tmp_path)
    assert out.returncode == 0, out.stderr
    cfg = json.loads(out.stdout)
    assert cfg["db"] == "django.db.backends.sqlite3"
    assert cfg["broker"].startswith("filesystem://")
    assert cfg["layer"] == "channels.layers.InMemoryChannelLayer"
    assert cfg["lock"] == "local"
    assert (cfg["acks_late"], cfg["reject"], cfg["prefetch"], cfg["serializer"]) == (True, True, 1, "json")
    assert cfg["limit"] > 0


def test_urls_switch_to_postgres_and_redis(tmp_path):
    out = probe(tmp_path, DATABASE_URL="postgres://u@db:5432/garden", REDIS_URL="redis://cache:6379/0")
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


@pytest.mark.postgres
@pytest.mark.django_db
def test_suite_runs_on_postgresql_when_services_are_required():
    assert connection.vendor == "postgresql"
    with connection.cursor() as cur:
        cur.execute("select version()")
        assert cur.fetchone()[0].startswith("PostgreSQL")
