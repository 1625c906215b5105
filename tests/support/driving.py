"""Inline step driving: a request's steps delivered in the test's own thread, one at a time, as a
worker would deliver them, so a test of routing, budgets or tools needs no worker and ends
quiescent (no step left to run) before it asserts what did not happen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def drive(request: Any, *states: str, limit: int = 30, until_waiting: bool = False) -> list[str]:
    """Deliver ``request``'s steps in this thread (starting it if it is queued) until it is in
    one of ``states`` (by default, until it has ended), or, with ``until_waiting``, until a
    step says it waits (a budget, a slot); return each step's outcome. A request that gets
    there in no more than ``limit`` deliveries passes; one that does not fails the test,
    naming where it stopped."""
    from groups.loop.step import advance_request
    from groups.models import GroupRequest
    from groups.services.requests import request_start_next

    wanted = states or tuple(GroupRequest.FINISHED_STATES)
    outcomes: list[str] = []
    for _ in range(limit):
        request.refresh_from_db()
        if request.state in wanted:
            return outcomes
        if request.state == GroupRequest.State.QUEUED:
            request_start_next(group_id=request.group_id)
            outcomes.append("started")
        else:
            outcomes.append(
                advance_request(
                    request_id=request.pk, fence=request.fence, group_id=request.group_id
                )
            )
            if until_waiting and outcomes[-1].startswith("waiting"):
                return outcomes
    request.refresh_from_db()
    pytest.fail(
        f"request {request.pk} never reached {wanted} in {limit} steps: {request.state} "
        f"{request.outcome!r} (outcomes {outcomes})",
        pytrace=False,
    )


def finished(request: Any) -> Callable[[], bool]:
    """A predicate for ``wait_for``: ``request`` (re-read) has ended, however it ended."""
    from groups.models import GroupRequest

    def check() -> bool:
        request.refresh_from_db()
        return request.state in GroupRequest.FINISHED_STATES

    return check


def statements_per_step(request: Any, *, steps: int = 50) -> list[int]:
    """Deliver ``request`` (running) once, going on in place for up to ``steps`` steps as a
    worker's delivery does, and return the statements each step sent to the database."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from groups.loop import step

    counts: list[int] = []
    one_step = step._locked_step

    def counted(**kwargs: Any) -> Any:
        start = len(queries.captured_queries)
        try:
            return one_step(**kwargs)
        finally:
            counts.append(len(queries.captured_queries) - start)

    step._locked_step = counted
    try:
        with CaptureQueriesContext(connection) as queries:
            step.advance_request(
                request_id=request.pk, fence=request.fence, group_id=request.group_id, steps=steps
            )
    finally:
        step._locked_step = one_step
    return counts
