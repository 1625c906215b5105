"""Mission services without a worker: the beat entry, skips with reasons, targets that went
away, the settling of a run whose end was not heard, and idempotent due runs."""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from garden.errors import ServiceError
from garden.models import Agent, Goal, Run
from groups.models import Group, GroupRequest
from groups.services.groups import group_archive, group_delete
from missions.models import Mission, MissionRun
from missions.services import (
    Schedule,
    mission_delete,
    mission_run_due,
    mission_update,
    missions_disable_for_group,
)
from tests.groups.conftest import make_group
from tests.missions.conftest import GARDEN, make_mission, notes, scripted_agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def group(owner):
    return make_group(owner, concierge_rules=[], members={"ledger": [{"reply": "A figure."}]})


def test_creating_a_mission_creates_an_enabled_beat_entry_for_run_mission(owner, group):
    mission = make_mission(owner, group)
    task = PeriodicTask.objects.get(pk=mission.periodic_task_id)
    assert (task.task, json.loads(task.kwargs), task.enabled) == (
        "missions.run_mission",
        {"mission_id": mission.pk},
        True,
    )
    assert (task.interval.every, task.interval.period, task.crontab) == (3600, "seconds", None)
    assert task.name == f"mission {mission.pk}: Weekly review"

    weekly = make_mission(
        owner,
        group,
        name="Mondays",
        schedule=Schedule(minute="0", hour="9", day_of_week="1", timezone="Europe/Berlin"),
    )
    task = weekly.periodic_task
    assert task.interval is None
    assert (
        task.crontab.minute,
        task.crontab.hour,
        task.crontab.day_of_week,
        task.crontab.day_of_month,
        str(task.crontab.timezone),
    ) == ("0", "9", "1", "*", "Europe/Berlin")


def test_the_target_must_match_its_type_in_the_database(owner, group):
    agent = Agent.objects.get(owner=owner, handle="ledger")
    with pytest.raises(IntegrityError), transaction.atomic():
        Mission.objects.create(
            owner=owner, name="x", prompt="y", target_type="group", target_agent=agent
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        Mission.objects.create(
            owner=owner,
            name="x",
            prompt="y",
            target_type="agent",
            target_agent=agent,
            target_group=group,
        )


def test_a_mission_never_has_two_active_runs_in_the_database(owner, group):
    mission = make_mission(owner, group)
    MissionRun.objects.create(mission=mission, state="active")
    with pytest.raises(IntegrityError), transaction.atomic():
        MissionRun.objects.create(mission=mission, state="active")
    with pytest.raises(IntegrityError), transaction.atomic():
        MissionRun.objects.create(mission=mission, state="skipped", skipped_reason="")


def test_a_due_run_starts_a_mission_goal_with_its_own_run(owner, group, runtime):
    mission = make_mission(owner, group)
    mission_run = mission_run_due(mission_id=mission.pk)
    assert mission_run.state == "active"
    request = mission_run.group_request
    assert (request.source, request.state, request.message_id) == (
        "mission",
        "queued",
        mission_run.owner_message_id,
    )
    goal = Goal.objects.get(pk=mission_run.goal_id)
    assert (goal.kind, goal.status, goal.owner_id) == ("mission", "open", owner.pk)
    run = Run.objects.get(pk=mission_run.run_id)
    assert (run.status, run.goal_id, run.actor) == ("running", goal.pk, f"group:{group.pk}")
    assert (runtime / "runs" / run.run_id).is_dir()


def test_a_run_due_while_one_is_active_is_recorded_as_skipped(owner, group, runtime):
    mission = make_mission(owner, group)
    first = mission_run_due(mission_id=mission.pk)
    second = mission_run_due(mission_id=mission.pk)
    assert (second.state, second.outcome_code) == ("skipped", "MISSION_ALREADY_ACTIVE")
    assert second.skipped_reason.startswith(f"Run {first.pk} of this mission was still active")
    assert second.goal_id is None and second.run_id is None and second.finished_at
    assert GroupRequest.objects.filter(group=group).count() == 1
    assert Goal.objects.filter(kind="mission").count() == 1
    mission.refresh_from_db()
    assert mission.enabled  # skipping for an active run disables nothing


def test_a_due_run_is_idempotent_by_its_task_id(owner, group, runtime):
    mission = make_mission(owner, group)
    first = mission_run_due(mission_id=mission.pk, task_id="beat-tick-1")
    again = mission_run_due(mission_id=mission.pk, task_id="beat-tick-1")
    assert again.pk == first.pk and again.state == "active"
    assert MissionRun.objects.count() == 1


def test_a_deleted_mission_runs_nothing(owner, group, runtime):
    mission = make_mission(owner, group)
    task_id = mission.periodic_task_id
    mission_delete(mission=mission)
    assert mission_run_due(mission_id=mission.pk) is None
    assert not PeriodicTask.objects.filter(pk=task_id).exists()


def test_a_group_deleted_behind_the_services_back_disables_the_mission_at_its_next_due_run(
    owner, group, runtime
):
    mission = make_mission(owner, group)
    # A write that bypasses save() (and so every hook): the due run still finds out.
    Group.objects.filter(pk=group.pk).update(deleted_at=timezone.now())
    skipped = mission_run_due(mission_id=mission.pk)
    assert (skipped.state, skipped.outcome_code, skipped.skipped_reason) == (
        "skipped",
        "TARGET_DELETED",
        "The target group was deleted.",
    )
    mission.refresh_from_db()
    assert (mission.enabled, mission.disabled_reason) == (False, "The target group was deleted.")
    assert PeriodicTask.objects.get(pk=mission.periodic_task_id).enabled is False
    assert not GroupRequest.objects.exists() and not Goal.objects.exists()
    # And the one after that says the mission is disabled, and why.
    again = mission_run_due(mission_id=mission.pk)
    assert (again.outcome_code, again.skipped_reason) == (
        "MISSION_DISABLED",
        "The mission is disabled: The target group was deleted.",
    )


def test_an_archived_group_disables_its_missions_at_the_next_due_run(owner, group, runtime):
    mission = make_mission(owner, group)
    Group.objects.filter(pk=group.pk).update(archived_at=timezone.now())
    skipped = mission_run_due(mission_id=mission.pk)
    assert (skipped.outcome_code, skipped.skipped_reason) == (
        "TARGET_ARCHIVED",
        "The target group was archived.",
    )
    assert Mission.objects.get(pk=mission.pk).enabled is False


def test_deleting_or_archiving_a_group_disables_its_missions_at_once(owner, group, runtime):
    deleted = make_mission(owner, group)
    other = make_group(owner, concierge_rules=[], members={"ledger": []}, name="Other")
    archived = make_mission(owner, other, name="Archived one")
    group_delete(group=group)
    group_archive(group=other)
    for mission, reason in (
        (deleted, "The target group was deleted."),
        (archived, "The target group was archived."),
    ):
        mission.refresh_from_db()
        assert (mission.enabled, mission.disabled_reason) == (False, reason)
        assert mission.periodic_task.enabled is False


def test_missions_disable_for_group_touches_only_enabled_missions_of_that_group(owner, group):
    on = make_mission(owner, group)
    off = make_mission(owner, group, name="Off")
    mission_update(mission=off, enabled=False)
    other = make_group(owner, concierge_rules=[], members={"ledger": []}, name="Other")
    elsewhere = make_mission(owner, other, name="Elsewhere")
    assert missions_disable_for_group(group=group, reason="Gone.") == 1
    on.refresh_from_db(), off.refresh_from_db(), elsewhere.refresh_from_db()
    assert (on.enabled, on.disabled_reason) == (False, "Gone.")
    assert off.disabled_reason == "Disabled by the owner."
    assert elsewhere.enabled


def test_a_removed_agent_stops_its_missions_with_a_clear_reason(owner, runtime):
    writer = scripted_agent(owner, "writer", [])
    mission = make_mission(owner, writer)
    Agent.objects.filter(pk=writer.pk).update(removed_at=timezone.now())
    skipped = mission_run_due(mission_id=mission.pk)
    assert (skipped.outcome_code, skipped.skipped_reason) == (
        "TARGET_REMOVED",
        "The target agent was removed.",
    )
    mission.refresh_from_db()
    assert (mission.enabled, mission.disabled_reason) == (False, "The target agent was removed.")

    # Removing through save() disables at once.
    other = scripted_agent(owner, "other", [])
    second = make_mission(owner, other, name="Second")
    other.removed_at = timezone.now()
    other.save(update_fields=["removed_at"])
    second.refresh_from_db()
    assert (second.enabled, second.disabled_reason) == (False, "The target agent was removed.")


def test_a_prompt_naming_a_non_member_is_skipped_and_disables_the_mission(owner, group, runtime):
    mission = make_mission(owner, group, prompt="@nobody please review.")
    skipped = mission_run_due(mission_id=mission.pk)
    assert (skipped.state, skipped.outcome_code) == ("skipped", "UNKNOWN_MEMBER")
    assert "@nobody" in skipped.skipped_reason
    assert not GroupRequest.objects.exists() and not Goal.objects.exists()
    assert Mission.objects.get(pk=mission.pk).enabled is False


def test_a_run_whose_end_was_not_heard_is_settled_by_the_next_due_run(owner, group, runtime):
    mission = make_mission(owner, group)
    first = mission_run_due(mission_id=mission.pk)
    # The request completed but its signal was lost (a crash between commit and send).
    GroupRequest.objects.filter(pk=first.group_request_id).update(
        state="completed",
        outcome_code="CONCLUDED",
        outcome="All settled.",
        finished_at=timezone.now(),
    )
    second = mission_run_due(mission_id=mission.pk)
    first.refresh_from_db()
    assert (first.state, first.outcome, first.report_state) == ("concluded", "All settled.", "sent")
    assert second.state == "active"
    assert Run.objects.get(pk=first.run_id).status == "succeeded"
    assert Goal.objects.get(pk=first.goal_id).status == "concluded"
    [note] = notes(runtime)
    assert "Mission “Weekly review” concluded.\n\nAll settled." in note


def test_a_cleared_history_ends_the_active_run_honestly(owner, group, runtime):
    mission = make_mission(owner, group)
    first = mission_run_due(mission_id=mission.pk)
    GroupRequest.objects.filter(pk=first.group_request_id).delete()
    mission_run_due(mission_id=mission.pk)
    first.refresh_from_db()
    assert (first.state, first.outcome_code) == ("failed", "REQUEST_GONE")
    assert Goal.objects.get(pk=first.goal_id).status == "failed"


def test_a_note_that_could_not_be_written_is_retried_at_the_next_due_run(owner, group, runtime):
    mission = make_mission(owner, group)
    first = mission_run_due(mission_id=mission.pk)
    GroupRequest.objects.filter(pk=first.group_request_id).update(
        state="completed", outcome="Done.", finished_at=timezone.now()
    )
    inbox = runtime / "inbox" / GARDEN
    inbox.mkdir(parents=True)
    (inbox / "notes").write_text("in the way")
    second = mission_run_due(mission_id=mission.pk)
    first.refresh_from_db()
    assert (first.state, first.report_state, first.report["code"]) == (
        "concluded",
        "failed",
        "IO_ERROR",
    )
    assert Goal.objects.get(pk=first.goal_id).status == "open"  # concluded only once told

    (inbox / "notes").unlink()
    GroupRequest.objects.filter(pk=second.group_request_id).update(
        state="stopped",
        outcome_code="STOPPED",
        outcome="Stopped by the owner.",
        finished_at=timezone.now(),
    )
    mission_run_due(mission_id=mission.pk)
    first.refresh_from_db(), second.refresh_from_db()
    assert first.report_state == second.report_state == "sent"
    assert Goal.objects.get(pk=first.goal_id).status == "concluded"
    assert Goal.objects.get(pk=second.goal_id).status == "failed"
    assert len(notes(runtime)) == 2


def test_an_origin_that_closed_sends_the_note_to_notes(owner, group, runtime):
    from garden.services.conversations import conversation_close, conversation_create

    origin = conversation_create(owner=owner, agent=Agent.objects.get(owner=owner, handle="ledger"))
    mission = make_mission(owner, group, origin=origin)
    conversation_close(conversation=origin)
    mission_run = mission_run_due(mission_id=mission.pk)
    assert Goal.objects.get(pk=mission_run.goal_id).origin is None


def test_a_disabled_mission_is_skipped_and_re_enabling_checks_the_target(owner, group, runtime):
    mission = make_mission(owner, group, enabled=False)
    assert mission.periodic_task.enabled is False
    skipped = mission_run_due(mission_id=mission.pk)
    assert (skipped.outcome_code, skipped.skipped_reason) == (
        "MISSION_DISABLED",
        "The mission is disabled: Disabled by the owner.",
    )
    Group.objects.filter(pk=group.pk).update(deleted_at=timezone.now())
    with pytest.raises(ServiceError) as refused:
        mission_update(mission=mission, enabled=True)
    assert (refused.value.code, refused.value.field) == ("TARGET_NOT_FOUND", "target_id")
    assert Mission.objects.get(pk=mission.pk).enabled is False
