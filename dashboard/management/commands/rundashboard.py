"""Serve the dashboard (HTTP and websockets) with daphne; on the embedded default, with the
Celery worker inside the same process so the room's live events reach the page."""

from __future__ import annotations

import re
import secrets
from contextlib import nullcontext

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from dashboard import serving

_ADDRPORT = re.compile(r"^(?:(?P<host>\[[0-9a-fA-F:]+\]|[\w.-]+):)?(?P<port>\d+)$")


def parse_addrport(value: str) -> tuple[str, int]:
    """``8000``, ``127.0.0.1:8000``, ``localhost:8000`` or ``[::1]:8000``."""
    match = _ADDRPORT.match(value)
    if match is None:
        raise CommandError(f"{value!r} is not a port or address:port.")
    port = int(match["port"])
    if not 0 < port < 65536:
        raise CommandError(f"{port} is not a port number.")
    return (match["host"] or "127.0.0.1").strip("[]"), port


class Command(BaseCommand):
    help = (
        "Serve the dashboard with daphne. Without REDIS_URL the channel layer is in memory, "
        "so a Celery worker runs in this process too; with REDIS_URL, workers run separately."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "addrport",
            nargs="?",
            default="127.0.0.1:8000",
            help="Where to listen: port or address:port (default 127.0.0.1:8000).",
        )
        parser.add_argument(
            "--worker-concurrency",
            type=int,
            default=4,
            help="Threads of the embedded worker (embedded default only).",
        )

    def handle(self, *args, **options):
        from daphne.server import Server

        host, port = parse_addrport(options["addrport"])
        embedded = not settings.REDIS_URL
        shown_host = f"[{host}]" if ":" in host else host
        self.stdout.write(f"garden dashboard: http://{shown_host}:{port}/dashboard/")
        self._first_user()
        if embedded:
            self.stdout.write(
                f"embedded worker: {options['worker_concurrency']} threads and beat in this "
                "process (no REDIS_URL)"
            )
        else:
            self.stdout.write(
                "REDIS_URL is set: serving only; run workers separately (make worker)"
            )
        worker = (
            serving.EmbeddedWorker(concurrency=options["worker_concurrency"])
            if embedded
            else nullcontext()
        )
        with worker:
            # daphne's reactor runs here, in the main thread, with its signal handlers: Ctrl-C
            # stops it, then the worker shuts down warm as the block ends.
            Server(
                application=serving.asgi_application(),
                endpoints=serving.endpoints(host, port),
                signal_handlers=True,
                verbosity=options["verbosity"],
            ).run()

    def _first_user(self) -> None:
        """On a site with no user at all, outside production: make the first (a superuser,
        ``admin``) with a random password printed here, this once. In production, say how."""
        from django.contrib.auth import get_user_model

        users = get_user_model()
        if users.objects.exists():
            return
        if settings.PRODUCTION:
            self.stdout.write(
                "no user yet: create the first with `python manage.py createsuperuser`"
            )
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(username="admin", password=password)
        self.stdout.write(
            f"first user: sign in as admin with the password {password} (printed this once; "
            "change it in the admin, or add users with `python manage.py createsuperuser`)"
        )
