"""Staff read each owner's notification settings and mutes in the admin; they add none."""

import pytest

from notifications.models import AgentMute, NotificationSettings
from tests.dashboard.helpers import teammate

pytestmark = pytest.mark.django_db


def test_staff_read_settings_and_mutes(client, django_user_model, owner):
    staff = django_user_model.objects.create_superuser(username="staff", password="pw-staff-1")
    NotificationSettings.objects.create(owner=owner, browser=False)
    mute = AgentMute.objects.create(owner=owner, agent=teammate(owner, "ledger", "Ledger"))
    client.force_login(staff)
    listed = client.get("/admin/notifications/agentmute/")
    assert listed.status_code == 200 and b"Ledger" in listed.content
    assert client.get(f"/admin/notifications/agentmute/{mute.pk}/change/").status_code == 200
    assert client.get("/admin/notifications/notificationsettings/").status_code == 200
    assert client.get("/admin/notifications/agentmute/add/").status_code == 403
