"""Serve the dashboard (HTTP and websockets) with daphne; on the embedded default, with the
Celery worker inside the same process so the room's live events reach the page."""

from __future__ import annotations

import errno
import re
import secrets
import socket
from contextlib import nullcontext

from django.conf import settings
from django.contrib.auth.hashers import UNUSABLE_PASSWORD_PREFIX
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

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
        shown_host = f"[{host}]" if ":" in host else host
        # Before anything is printed: an address and password for a server that never started
        # would send a person to whatever holds the port.
        check_free(host, port, shown_host)
        embedded = not settings.REDIS_URL
        self.stdout.write(f"garden dashboard: http://{shown_host}:{port}/dashboard/")
        self._first_user()
        # The check's connection goes back now: this thread serves no request, and under
        # GARDEN_DB_POOL_MAX it would hold one of the pool's connections for good.
        connections.close_all()
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
        """Outside production, when no active user can sign in with a password (the demo's
        owner has none): make ``admin`` a superuser with a random password printed here, this
        once. In production, on a site with no user, say how to make one."""
        from django.contrib.auth import get_user_model

        users = get_user_model()
        if settings.PRODUCTION:
            if not users.objects.exists():
                self.stdout.write(
                    "no user yet: create the first with `python manage.py createsuperuser`"
                )
            return
        can_sign_in = (
            users.objects.filter(is_active=True)
            .exclude(password="")
            .exclude(password__startswith=UNUSABLE_PASSWORD_PREFIX)
        )
        if can_sign_in.exists():
            return
        password = secrets.token_urlsafe(12)
        admin = users.objects.filter(username="admin").first()
        if admin is None:
            users.objects.create_superuser(username="admin", password=password)
        else:  # there, but unable to sign in: given a password and the staff rights it lacks
            admin.set_password(password)
            admin.is_active = admin.is_staff = admin.is_superuser = True
            admin.save()
        self.stdout.write(
            f"first user: sign in as admin with the password {password} (printed this once; "
            "change it in the admin, or add users with `python manage.py createsuperuser`)"
        )


def check_free(host: str, port: int, shown_host: str) -> None:
    """Refuse, by name and with what to do, an address this process cannot listen on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CommandError(
                    f"{shown_host}:{port} is already in use: stop what serves there, or choose "
                    f"another port (make run PORT={port + 1}, or rundashboard "
                    f"{shown_host}:{port + 1})."
                ) from exc
            raise CommandError(f"cannot listen on {shown_host}:{port}: {exc.strerror}.") from exc
