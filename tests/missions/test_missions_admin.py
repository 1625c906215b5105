"""Admin for missions: staff see the schedule (linked to its beat entry), enabled and the last
run; edits go through the service; runs are read-only."""

import pytest
from django.utils import timezone

from groups.models import Group
from missions.models import MissionRun
from missions.services import mission_run_due
from tests.groups.conftest import make_group
from tests.missions.conftest import make_mission

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(django_user_model, client):
    user = django_user_model.objects.create_superuser(username="staff", password="pw-staff-123")
    client.force_login(user)
    return user


@pytest.fixture
def mission(owner):
    group = make_group(owner, concierge_rules=[], members={"ledger": []})
    return make_mission(owner, group)


def form(mission, **changes):
    data = {
        "name": mission.name,
        "prompt": mission.prompt,
        "enabled": "on",
        "runs-TOTAL_FORMS": "0",
        "runs-INITIAL_FORMS": "0",
        "runs-MIN_NUM_FORMS": "0",
        "runs-MAX_NUM_FORMS": "0",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def test_the_list_and_change_page_show_schedule_enabled_and_last_run(
    client, staff, mission, runtime
):
    run = mission_run_due(mission_id=mission.pk)
    page = client.get("/admin/missions/mission/").content.decode()
    assert "Weekly review" in page and "every 3600 seconds (enabled)" in page
    assert f"/admin/django_celery_beat/periodictask/{mission.periodic_task_id}/change/" in page
    assert f"/admin/missions/missionrun/{run.pk}/change/" in page and "active" in page
    assert client.get(f"/admin/missions/mission/{mission.pk}/change/").status_code == 200
    # The schedule itself is edited on its beat entry, in django-celery-beat's admin.
    assert (
        client.get(
            f"/admin/django_celery_beat/periodictask/{mission.periodic_task_id}/change/"
        ).status_code
        == 200
    )


def test_disabling_in_the_admin_disables_the_beat_entry(client, staff, mission):
    response = client.post(
        f"/admin/missions/mission/{mission.pk}/change/", form(mission, name="Renamed", enabled=None)
    )
    assert response.status_code == 302
    mission.refresh_from_db()
    assert (mission.name, mission.enabled, mission.disabled_reason) == (
        "Renamed",
        False,
        "Disabled by the owner.",
    )
    assert mission.periodic_task.enabled is False
    assert mission.periodic_task.name == f"mission {mission.pk}: Renamed"


def test_re_enabling_in_the_admin_checks_the_target(client, staff, mission):
    client.post(f"/admin/missions/mission/{mission.pk}/change/", form(mission, enabled=None))
    Group.objects.filter(pk=mission.target_group_id).update(deleted_at=timezone.now())
    response = client.post(f"/admin/missions/mission/{mission.pk}/change/", form(mission))
    assert response.status_code == 200
    assert "TARGET_NOT_FOUND" in response.content.decode()
    mission.refresh_from_db()
    assert mission.enabled is False


def test_runs_are_read_only(client, staff, mission, runtime):
    run = mission_run_due(mission_id=mission.pk)
    assert client.get(f"/admin/missions/missionrun/{run.pk}/change/").status_code == 200
    assert client.get("/admin/missions/missionrun/add/").status_code == 403
    client.post(f"/admin/missions/missionrun/{run.pk}/change/", {"state": "concluded"})
    assert MissionRun.objects.get(pk=run.pk).state == "active"
    assert client.get("/admin/missions/mission/add/").status_code == 403


def test_the_run_now_action(client, staff, mission, runtime):
    response = client.post(
        "/admin/missions/mission/",
        {"action": "run_now", "_selected_action": [str(mission.pk)]},
        follow=True,
    )
    assert response.status_code == 200
    assert MissionRun.objects.get(mission=mission).trigger == "manual"
    assert "active" in response.content.decode()
