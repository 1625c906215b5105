"""Writes for missions: create, change and delete a mission with its beat entry (``missions``,
``schedules``, ``checks``); start or skip each due run (``runs``); conclude a run and have the
gardener say so (``conclusion``). Each service is keyword-only and named <entity>_<action>.

The public names are importable from this package too; code inside the app imports them from
their modules.
"""

from missions.services.checks import MAX_ID, check_mission_quota, check_origin, check_target
from missions.services.conclusion import (
    mission_run_conclude,
    mission_run_report_retry,
    mission_run_work_ended,
    mission_settle,
)
from missions.services.missions import (
    AGENT_REMOVED,
    DISABLED_BY_OWNER,
    GROUP_ARCHIVED,
    GROUP_DELETED,
    mission_create,
    mission_delete,
    mission_update,
    missions_disable_for_agent,
    missions_disable_for_group,
)
from missions.services.runs import mission_run_due
from missions.services.schedules import (
    CRONTAB_FIELDS,
    MAX_EVERY_SECONDS,
    MIN_EVERY_SECONDS,
    Schedule,
    check_schedule,
    crontab_min_gap_seconds,
    mission_periodic_task_delete,
)

__all__ = [
    "AGENT_REMOVED",
    "CRONTAB_FIELDS",
    "DISABLED_BY_OWNER",
    "GROUP_ARCHIVED",
    "GROUP_DELETED",
    "MAX_EVERY_SECONDS",
    "MAX_ID",
    "MIN_EVERY_SECONDS",
    "Schedule",
    "check_mission_quota",
    "check_origin",
    "check_schedule",
    "check_target",
    "crontab_min_gap_seconds",
    "mission_create",
    "mission_delete",
    "mission_periodic_task_delete",
    "mission_run_conclude",
    "mission_run_due",
    "mission_run_report_retry",
    "mission_run_work_ended",
    "mission_settle",
    "mission_update",
    "missions_disable_for_agent",
    "missions_disable_for_group",
]
