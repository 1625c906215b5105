"""What config/settings.py refuses at start-up, and where its development key comes from.

Each check raises ImproperlyConfigured naming the variable, so a misconfigured process stops
before it serves anything. Nothing here writes: importing the settings only reads.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from garden.credentials import parse_credentials
from garden.egress import parse_allowlist

DEV_SECRET_FILE = "secret_key"


def secret_key(*, configured: str, production: bool, var_dir: Path) -> str:
    """DJANGO_SECRET_KEY when set; in production nothing else will do.

    Development reads ``var/secret_key`` when it exists (earlier checkouts wrote a random one
    there; keeping it keeps their sessions and pasted keys readable), else derives a key from
    the var/ path. Derived, every process of a checkout (web, worker, test runner) agrees on it
    without one of them having to write it first. It is not a secret, which is why production
    refuses to start without DJANGO_SECRET_KEY.
    """
    if configured:
        return configured
    if production:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is not set. garden refuses to start in production "
            "(GARDEN_ENV=production) without a secret key."
        )
    kept = var_dir / DEV_SECRET_FILE
    if kept.is_file():
        return kept.read_text().strip()
    digest = hashlib.sha256(b"garden development key\0" + str(var_dir.resolve()).encode())
    return f"garden-development-{digest.hexdigest()}"


def check_step_limits(chain: Sequence[float]) -> None:
    """The step limits, shortest first, must each be shorter than the next."""
    if any(a >= b for a, b in itertools.pairwise(chain)):
        raise ImproperlyConfigured(
            "Step limits out of order: GARDEN_MODEL_CALL_TIMEOUT < GARDEN_TASK_SOFT_TIME_LIMIT < "
            "GARDEN_TASK_TIME_LIMIT < GARDEN_LOCK_TTL_SECONDS < GARDEN_SWEEP_AFTER_SECONDS must "
            f"hold; got {', '.join(f'{v:g}' for v in chain)}."
        )


def _http_url(value: str) -> None:
    parsed = urlsplit(value)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"not an http(s) URL: {value!r}")
    if parsed.query or parsed.fragment or parsed.username or parsed.password:
        raise ValueError("a base URL has no query, fragment or user name")


def check_egress_and_keys(values: Mapping[str, Any]) -> None:
    """Parse the egress allowlists, the operator's credentials and the Fernet keys as the code
    that uses them will, so a typo stops the process at start-up rather than a later call."""
    checks: dict[str, Callable[[Any], object]] = {
        "GARDEN_EGRESS_ALLOW": parse_allowlist,
        "GARDEN_EGRESS_ALLOW_PROVIDERS": parse_allowlist,
        "GARDEN_EGRESS_ALLOW_TELEGRAM": parse_allowlist,
        "GARDEN_TELEGRAM_API_URL": _http_url,
        "GARDEN_CREDENTIALS": parse_credentials,
        "GARDEN_FERNET_KEYS": lambda keys: [Fernet(k.encode()) for k in keys],
    }
    for name, check in checks.items():
        try:
            check(values[name])
        except (ValueError, TypeError) as exc:
            raise ImproperlyConfigured(f"{name}: {exc}") from exc
