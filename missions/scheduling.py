"""The names of the missions' Celery tasks, and their sends by name after commit.

Services enqueue through here rather than by importing ``missions.tasks``, which imports them.
A signature by name uses the registered task's ``apply_async`` when the task module is loaded
(eager mode and routing still apply), and a plain send by name otherwise.
"""

from __future__ import annotations

import celery
from django.db import transaction

RUN_MISSION = "missions.run_mission"
CONCLUDE_RUN = "missions.conclude_run"


def conclude_run_on_commit(*, mission_run_id: int) -> None:
    """Send ``missions.conclude_run`` for the run once the caller's transaction commits (at
    once outside a transaction)."""
    transaction.on_commit(
        lambda: celery.signature(CONCLUDE_RUN).apply_async(
            kwargs={"mission_run_id": mission_run_id}
        )
    )
