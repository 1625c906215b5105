"""The names of the missions' Celery tasks, and their sends by name (``garden.scheduling``).

Services enqueue through here rather than by importing ``missions.tasks``, which imports them.
"""

from __future__ import annotations

from garden.scheduling import send_on_commit

RUN_MISSION = "missions.run_mission"
CONCLUDE_RUN = "missions.conclude_run"


def conclude_run_on_commit(*, mission_run_id: int) -> None:
    """Send ``missions.conclude_run`` for the run once the caller's transaction commits (at
    once outside a transaction)."""
    send_on_commit(CONCLUDE_RUN, mission_run_id=mission_run_id)
