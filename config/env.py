"""Where garden's settings come from: the process's environment, read with django-environ, and
the few facts the others derive from (the checkout's folder, development or production, var/).
config/settings.py and its sibling modules all start here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

GARDEN_ENV = env.str("GARDEN_ENV", default="development")
if GARDEN_ENV not in {"development", "production"}:
    raise ImproperlyConfigured(
        f"GARDEN_ENV must be 'development' or 'production', not {GARDEN_ENV!r}"
    )
PRODUCTION = GARDEN_ENV == "production"

VAR_DIR = Path(env.str("GARDEN_VAR_DIR", default=str(BASE_DIR / "var")))


def env_json(name: str) -> Any:
    """A setting given as JSON; unset or blank, an empty object."""
    return env.json(name) if env.str(name, default="").strip() else {}
