"""Thin Celery tasks of missions: take ids, call one service, stay idempotent. Services send
them by name (``missions.scheduling``) and never import this module."""

from celery import shared_task

from missions.scheduling import CONCLUDE_RUN, RUN_MISSION
from missions.services.conclusion import mission_run_conclude
from missions.services.runs import mission_run_due


@shared_task(
    name=RUN_MISSION,
    bind=True,
    acks_late=True,
    ignore_result=True,
    soft_time_limit=60,
    time_limit=90,
)
def run_mission(self, mission_id: int, trigger: str = "schedule") -> int | None:
    """The beat entry of every mission (kwargs ``{"mission_id": id}``): start the due run or
    record it as skipped. A redelivery finds the run its first delivery made, by task id."""
    run = mission_run_due(mission_id=mission_id, trigger=trigger, task_id=self.request.id or "")
    return run.pk if run is not None else None


@shared_task(
    name=CONCLUDE_RUN,
    acks_late=True,
    ignore_result=True,
    soft_time_limit=60,
    time_limit=90,
)
def conclude_run(mission_run_id: int) -> str | None:
    """Close a run whose group request finished or whose owner turn was answered, and have
    the gardener leave its recently_concluded note."""
    run = mission_run_conclude(mission_run_id=mission_run_id)
    return run.state if run is not None else None
