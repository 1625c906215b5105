"""The missions API: owner-only with session and CSRF, named 400s that write nothing, 404 for
another owner's mission, run now (202, or 409 with the skip recorded)."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from rest_framework.test import APIClient

from garden.models import Agent, Conversation, Goal
from garden.services.conversations import conversation_create
from groups.models import Group, GroupRequest
from missions.models import Mission, MissionRun
from tests.groups.conftest import make_group
from tests.missions.conftest import make_mission, scripted_agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def group(owner):
    return make_group(owner, concierge_rules=[], members={"ledger": [{"reply": "A figure."}]})


@pytest.fixture
def body(group):
    return {
        "name": "Weekly review",
        "prompt": "Review this week's spending.",
        "target_type": "group",
        "target_id": group.pk,
        "schedule": {"every_seconds": 3600},
    }


def errors(response) -> list[tuple[str, str]]:
    return [(e["field"], e["code"]) for e in response.json()["errors"]]


def nothing_written() -> bool:
    return (
        not Mission.objects.exists()
        and not PeriodicTask.objects.filter(task="missions.run_mission").exists()
    )


def test_create_returns_the_mission_with_its_schedule_and_beat_entry(api, body, group):
    response = api.post("/api/missions", body)
    assert response.status_code == 201, response.json()
    data = response.json()
    assert (data["name"], data["target"], data["enabled"], data["last_run"]) == (
        "Weekly review",
        {"type": "group", "id": group.pk, "name": "Team"},
        True,
        None,
    )
    assert data["schedule"]["kind"] == "interval" and data["schedule"]["every_seconds"] == 3600
    task = PeriodicTask.objects.get(pk=data["periodic_task"])
    assert (task.task, json.loads(task.kwargs), task.enabled) == (
        "missions.run_mission",
        {"mission_id": data["id"]},
        True,
    )


def test_create_with_crontab_fields_and_an_origin(api, owner, group):
    concierge = Agent.objects.get(owner=owner, handle="concierge")
    origin = conversation_create(owner=owner, agent=concierge)
    response = api.post(
        "/api/missions",
        {
            "name": "Mondays",
            "prompt": "Plan the week.",
            "target_type": "agent",
            "target_id": concierge.pk,
            "origin_conversation": origin.pk,
            "schedule": {
                "minute": "30",
                "hour": "8",
                "day_of_week": "mon-fri",
                "timezone": "Europe/Paris",
            },
        },
    )
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["schedule"] | {"description": ""} == {
        "kind": "crontab",
        "every_seconds": None,
        "minute": "30",
        "hour": "8",
        "day_of_week": "mon-fri",
        "day_of_month": "*",
        "month_of_year": "*",
        "timezone": "Europe/Paris",
        "description": "",
    }
    assert (data["target"]["type"], data["origin_conversation"]) == ("agent", origin.pk)


def test_writes_need_the_csrf_pair_and_a_session(owner, body):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post("/api/missions", body, format="json").status_code == 403
    assert APIClient().get("/api/missions").status_code == 403
    assert nothing_written()


@pytest.mark.parametrize(
    ("change", "field", "code"),
    [
        ({"target_type": "robot"}, "target_type", "invalid_choice"),
        ({"target_id": 0}, "target_id", "min_value"),
        ({"name": "   "}, "name", "blank"),
        ({"prompt": ""}, "prompt", "blank"),
        ({"schedule": {}}, "schedule", "SCHEDULE_EMPTY"),
        ({"schedule": {"every_seconds": 3600, "minute": "0"}}, "schedule", "SCHEDULE_CONFLICT"),
        ({"schedule": {"every_seconds": 10}}, "schedule.every_seconds", "min_value"),
        ({"schedule": {"minute": "61"}}, "schedule.minute", "invalid"),
        ({"schedule": {"hour": "0", "timezone": "Mars/Olympus"}}, "schedule.timezone", "invalid"),
        ({"origin_conversation": 999_999}, "origin_conversation", "ORIGIN_NOT_FOUND"),
        ({"target_id": 999_999}, "target_id", "TARGET_NOT_FOUND"),
    ],
)
def test_bad_input_is_a_400_with_field_and_code_and_writes_nothing(api, body, change, field, code):
    response = api.post("/api/missions", {**body, **change})
    assert response.status_code == 400, response.json()
    assert (field, code) in errors(response)
    assert nothing_written()


def test_targets_must_be_the_owners_and_still_there(api, owner, stranger, body, group):
    strangers = scripted_agent(stranger, "spy", [])
    assert errors(
        api.post("/api/missions", {**body, "target_type": "agent", "target_id": strangers.pk})
    ) == [("target_id", "TARGET_NOT_FOUND")]
    removed = scripted_agent(owner, "gone", [])
    Agent.objects.filter(pk=removed.pk).update(removed_at=timezone.now())
    assert errors(
        api.post("/api/missions", {**body, "target_type": "agent", "target_id": removed.pk})
    ) == [("target_id", "TARGET_REMOVED")]
    Group.objects.filter(pk=group.pk).update(archived_at=timezone.now())
    assert errors(api.post("/api/missions", body)) == [("target_id", "TARGET_ARCHIVED")]
    Group.objects.filter(pk=group.pk).update(archived_at=None, deleted_at=timezone.now())
    assert errors(api.post("/api/missions", body)) == [("target_id", "TARGET_NOT_FOUND")]
    # The group's id given as an agent's is not found either.
    assert errors(
        api.post("/api/missions", {**body, "target_type": "agent", "target_id": 999_999})
    ) == [("target_id", "TARGET_NOT_FOUND")]
    closed = conversation_create(owner=owner, agent=Agent.objects.get(owner=owner, handle="ledger"))
    Conversation.objects.filter(pk=closed.pk).update(status="closed")
    Group.objects.filter(pk=group.pk).update(deleted_at=None)
    assert errors(api.post("/api/missions", {**body, "origin_conversation": closed.pk})) == [
        ("origin_conversation", "ORIGIN_CLOSED")
    ]
    theirs = conversation_create(owner=stranger, agent=strangers)
    assert errors(api.post("/api/missions", {**body, "origin_conversation": theirs.pk})) == [
        ("origin_conversation", "ORIGIN_NOT_FOUND")
    ]
    assert nothing_written()


def test_another_owners_mission_is_a_404_on_every_route(api, stranger):
    theirs = make_mission(stranger, scripted_agent(stranger, "spy", []))
    path = f"/api/missions/{theirs.pk}"
    assert api.get(path).status_code == 404
    assert api.patch(path, {"name": "Mine now"}).status_code == 404
    assert api.delete(path).status_code == 404
    assert api.post(f"{path}/run").status_code == 404
    assert api.get(f"{path}/runs").status_code == 404
    assert api.get("/api/missions").json() == []
    theirs.refresh_from_db()
    assert theirs.name == "Weekly review" and not theirs.runs.exists()


def test_patch_changes_the_mission_and_its_beat_entry(api, owner, group):
    mission = make_mission(owner, group)
    path = f"/api/missions/{mission.pk}"
    response = api.patch(
        path, {"name": "Daily review", "enabled": False, "schedule": {"minute": "0", "hour": "7"}}
    )
    assert response.status_code == 200, response.json()
    data = response.json()
    assert (data["name"], data["enabled"], data["disabled_reason"]) == (
        "Daily review",
        False,
        "Disabled by the owner.",
    )
    assert (data["schedule"]["kind"], data["schedule"]["hour"]) == ("crontab", "7")
    task = PeriodicTask.objects.get(pk=mission.periodic_task_id)
    assert (task.name, task.enabled, task.interval, task.crontab.hour) == (
        f"mission {mission.pk}: Daily review",
        False,
        None,
        "7",
    )

    data = api.patch(path, {"enabled": True}).json()
    assert (data["enabled"], data["disabled_reason"]) == (True, "")
    assert PeriodicTask.objects.get(pk=mission.periodic_task_id).enabled is True


def test_patch_refusals_write_nothing(api, owner, group):
    mission = make_mission(owner, group)
    path = f"/api/missions/{mission.pk}"
    assert errors(api.patch(path, {"target_type": "agent"})) == [("target_id", "TARGET_INCOMPLETE")]
    assert errors(api.patch(path, {"name": "x", "schedule": {"every_seconds": 1}})) == [
        ("schedule.every_seconds", "min_value")
    ]
    api.patch(path, {"enabled": False})
    Group.objects.filter(pk=group.pk).update(deleted_at=timezone.now())
    response = api.patch(path, {"enabled": True, "name": "Renamed"})
    assert (response.status_code, errors(response)) == (400, [("target_id", "TARGET_NOT_FOUND")])
    mission.refresh_from_db()
    assert (mission.name, mission.enabled) == ("Weekly review", False)


def test_patch_can_retarget_and_clear_the_origin(api, owner, group):
    concierge = Agent.objects.get(owner=owner, handle="concierge")
    origin = conversation_create(owner=owner, agent=concierge)
    mission = make_mission(owner, group, origin=origin)
    data = api.patch(
        f"/api/missions/{mission.pk}",
        {"target_type": "agent", "target_id": concierge.pk, "origin_conversation": None},
    ).json()
    assert (data["target"]["id"], data["target_type"], data["origin_conversation"]) == (
        concierge.pk,
        "agent",
        None,
    )


def test_delete_removes_the_mission_its_runs_and_its_beat_entry(api, owner, group, runtime):
    mission = make_mission(owner, group)
    api.post(f"/api/missions/{mission.pk}/run")
    task_id = mission.periodic_task_id
    response = api.delete(f"/api/missions/{mission.pk}")
    assert response.status_code == 204
    assert not Mission.objects.exists() and not MissionRun.objects.exists()
    assert not PeriodicTask.objects.filter(pk=task_id).exists()
    # The run it had started is closed honestly; its group request is the group's to stop.
    assert Goal.objects.get(kind="mission").status == "failed"
    assert GroupRequest.objects.get().source == "mission"


def test_run_now_starts_a_run_and_a_second_one_is_a_recorded_409(api, owner, group, runtime):
    mission = make_mission(owner, group)
    response = api.post(f"/api/missions/{mission.pk}/run")
    assert response.status_code == 202, response.json()
    started = response.json()
    assert (started["state"], started["trigger"]) == ("active", "manual")
    assert GroupRequest.objects.get(pk=started["group_request"]).source == "mission"

    response = api.post(f"/api/missions/{mission.pk}/run")
    assert response.status_code == 409
    data = response.json()
    assert (data["code"], list(data)) == (
        "MISSION_ALREADY_ACTIVE",
        ["code", "message", "errors", "mission_run"],
    )
    assert data["errors"] == [
        {"field": "non_field_errors", "code": "MISSION_ALREADY_ACTIVE", "message": data["message"]}
    ]
    assert data["mission_run"]["state"] == "skipped"

    runs = api.get(f"/api/missions/{mission.pk}/runs").json()
    assert [(r["state"], r["outcome_code"]) for r in runs] == [
        ("skipped", "MISSION_ALREADY_ACTIVE"),
        ("active", ""),
    ]
    assert runs[0] == data["mission_run"]
    listed = api.get("/api/missions").json()
    assert [m["last_run"]["id"] for m in listed] == [data["mission_run"]["id"]]


def test_run_now_of_a_mission_whose_group_was_deleted_is_a_409_that_disables_it(
    api, owner, group, runtime
):
    mission = make_mission(owner, group)
    Group.objects.filter(pk=group.pk).update(deleted_at=timezone.now())
    response = api.post(f"/api/missions/{mission.pk}/run")
    assert (response.status_code, response.json()["code"]) == (409, "TARGET_DELETED")
    data = api.get(f"/api/missions/{mission.pk}").json()
    assert (data["enabled"], data["disabled_reason"]) == (False, "The target group was deleted.")
    assert data["last_run"]["skipped_reason"] == "The target group was deleted."
