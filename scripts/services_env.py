"""Print shell exports for the services a test run should use.

An explicit DATABASE_URL / REDIS_URL wins. Otherwise this machine's local defaults
(PostgreSQL and Redis on localhost) are used when they answer; when they don't, the variable
stays unset and the tests that need the service skip with a reason (or fail, under
GARDEN_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import os
import shlex
import socket

LOCAL = {
    "DATABASE_URL": ("127.0.0.1", 5432, "postgres://postgres@127.0.0.1:5432/test"),
    "REDIS_URL": ("127.0.0.1", 6379, "redis://127.0.0.1:6379/0"),
}


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


for name, (host, port, url) in LOCAL.items():
    if os.environ.get(name):
        print(f"export {name}={shlex.quote(os.environ[name])}")
    elif reachable(host, port):
        print(f"export {name}={shlex.quote(url)}")
