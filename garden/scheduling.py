"""Sending a Celery task by name, the one way every app enqueues without importing the module
that defines the task: now (``send``), or once the caller's transaction commits
(``send_on_commit``), which inside a unit of work (a group step, ``garden.effects``) waits
until that ends, so the task a step sends never finds the group's lock still held."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import signature
from django.db import transaction

from garden import effects, lost_sends, telemetry
from garden.unavailable import SERVICE_AWAY


def send(name: str, *, countdown: float | None = None, **kwargs: Any) -> None:
    """Send task ``name`` now, not waiting for any commit. A registered task sends through
    its own ``apply_async`` (its routing and options); the name alone is enough for a process
    that only enqueues. A broker that does not take it now gets it again when it answers."""
    options: dict[str, Any] = {"countdown": countdown} if countdown else {}
    headers = telemetry.task_headers()
    if headers:
        options["headers"] = headers

    def deliver() -> None:
        signature(name, kwargs=kwargs).apply_async(**options)

    try:
        deliver()
    except SERVICE_AWAY as exc:
        # The write it follows stands: sent again once the broker answers (garden/lost_sends.py).
        lost_sends.keep(deliver, name, exc)


def send_after_commit(deliver: Callable[[], None]) -> None:
    """Call ``deliver`` (one or more sends) after commit (at once outside a transaction) and,
    inside a unit of work, only when it ends."""

    def on_commit() -> None:
        collecting = effects.current()
        if collecting is None:
            deliver()
        else:
            collecting.sends.append(deliver)

    transaction.on_commit(on_commit)


def continue_after_commit(key: tuple[Any, ...], deliver: Callable[[], None]) -> None:
    """As ``send_after_commit``, but inside a unit of work ``deliver`` is kept as the block's
    continuation (``garden.effects.Continuation``, named by ``key``): the block may carry the
    work on itself instead of sending it, and sends it when it ends if it does not."""

    def on_commit() -> None:
        collecting = effects.current()
        if collecting is None:
            deliver()
            return
        if collecting.continuation is not None:
            collecting.sends.append(collecting.continuation.deliver)
        collecting.continuation = effects.Continuation(key=key, deliver=deliver)

    transaction.on_commit(on_commit)


def send_on_commit(name: str, *, countdown: float | None = None, **kwargs: Any) -> None:
    """``send`` task ``name`` once the caller's transaction commits (see send_after_commit)."""
    send_after_commit(lambda: send(name, countdown=countdown, **kwargs))
