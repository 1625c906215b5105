"""Print shell exports that give a second test run of the same suite services of its own:
DATABASE_URL naming another database (its name with ``_<suffix>``, so pytest-django's test
database is another too) and REDIS_URL the next Redis database (broker, cache, locks and the
channel layer live there), so the two runs never share a row, a key or a task.

    eval "$(python scripts/split_env.py dashboard)"
"""

from __future__ import annotations

import os
import shlex
import sys
from urllib.parse import urlsplit, urlunsplit

# Redis has databases 0-15 by default.
REDIS_DATABASES = 16


def database_url(url: str, suffix: str) -> str:
    parts = urlsplit(url)
    name = parts.path.lstrip("/") or "garden"
    return urlunsplit(parts._replace(path=f"/{name}_{suffix}"))


def redis_url(url: str) -> str:
    parts = urlsplit(url)
    index = parts.path.lstrip("/")
    db = int(index) if index.isdigit() else 0
    return urlunsplit(parts._replace(path=f"/{(db + 1) % REDIS_DATABASES}"))


def main(suffix: str) -> None:
    if os.environ.get("DATABASE_URL"):
        print(
            f"export DATABASE_URL={shlex.quote(database_url(os.environ['DATABASE_URL'], suffix))}"
        )
    if os.environ.get("REDIS_URL"):
        print(f"export REDIS_URL={shlex.quote(redis_url(os.environ['REDIS_URL']))}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "split")
