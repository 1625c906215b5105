"""The URL of this test process's database, for a subprocess (a worker, a web server, a
killed emitter) to reach the same one."""

from __future__ import annotations

from urllib.parse import quote

from django.db import connection


def database_url() -> str:
    """``postgres://user[:password]@host:port/name`` of the database this process uses (the
    test database once pytest-django has made it), or ``sqlite:///path`` on SQLite."""
    database = connection.settings_dict
    if database["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{database['NAME']}"
    user = quote(database["USER"] or "", safe="")
    password = f":{quote(database['PASSWORD'], safe='')}" if database.get("PASSWORD") else ""
    host = database["HOST"] or "127.0.0.1"
    return f"postgres://{user}{password}@{host}:{database['PORT'] or 5432}/{database['NAME']}"
