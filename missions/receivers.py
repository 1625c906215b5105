"""Signal receivers: thin hooks that call mission services.

- ``groups.signals.request_finished``: a mission's work (a group's request, or an agent's in
  its 1:1 conversation) ended, so its run is concluded (in a task, after commit).
- a group saved as deleted or archived, an agent saved as removed: their missions are disabled.
  The due run checks the target too, so a write that bypasses ``save()`` is still caught.
- a mission deleted (directly or by cascade): its beat entry goes with it.
"""

import logging

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from garden.models import Agent
from groups.models import Group
from groups.signals import request_finished

from .models import Mission
from .services.conclusion import mission_run_work_ended
from .services.missions import (
    AGENT_REMOVED,
    GROUP_ARCHIVED,
    GROUP_DELETED,
    missions_disable_for_agent,
    missions_disable_for_group,
)
from .services.schedules import mission_periodic_task_delete

log = logging.getLogger(__name__)


@receiver(request_finished, dispatch_uid="missions_request_finished")
def _request_finished(sender, request_id, **kwargs):
    try:
        mission_run_work_ended(group_request_id=request_id)
    except Exception:  # the loop must not fail for a mission; the next due run settles it
        log.exception("mission run of request %s not concluded", request_id)


def _touches(update_fields, name: str) -> bool:
    return update_fields is None or name in update_fields


@receiver(post_save, sender=Group, dispatch_uid="missions_group_saved")
def _group_saved(sender, instance, created, update_fields=None, raw=False, **kwargs):
    if raw or created:
        return
    if instance.deleted_at is not None and _touches(update_fields, "deleted_at"):
        missions_disable_for_group(group=instance, reason=GROUP_DELETED)
    elif instance.archived_at is not None and _touches(update_fields, "archived_at"):
        missions_disable_for_group(group=instance, reason=GROUP_ARCHIVED)


@receiver(post_save, sender=Agent, dispatch_uid="missions_agent_saved")
def _agent_saved(sender, instance, created, update_fields=None, raw=False, **kwargs):
    if (
        not raw
        and not created
        and instance.removed_at is not None
        and _touches(update_fields, "removed_at")
    ):
        missions_disable_for_agent(agent=instance, reason=AGENT_REMOVED)


@receiver(post_delete, sender=Mission, dispatch_uid="missions_mission_deleted")
def _mission_deleted(sender, instance, **kwargs):
    mission_periodic_task_delete(periodic_task_id=instance.periodic_task_id)
