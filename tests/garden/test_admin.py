"""Admin: staff list and edit agents and conversations; other users cannot reach it."""

import pytest

from garden.models import Agent, Conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_superuser(username="staff", password="pw-staff-123")


def test_staff_lists_and_edits_agents(client, staff, owner):
    client.force_login(staff)
    assert client.get("/admin/garden/agent/").status_code == 200
    agent = Agent.objects.get(owner=owner, handle="concierge")
    page = client.get(f"/admin/garden/agent/{agent.pk}/change/")
    assert page.status_code == 200
    response = client.post(
        f"/admin/garden/agent/{agent.pk}/change/",
        {
            "owner": owner.pk,
            "handle": "concierge",
            "name": "Front Desk",
            "colour": "#2e7d6b",
            "instructions": "x",
            "model_account": agent.model_account_id,
            "enabled_tools": "[]",
            "approval_tools": "[]",
            "builtin": "concierge",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    agent.refresh_from_db()
    assert agent.name == "Front Desk"


def test_staff_lists_and_opens_conversations(client, staff, owner):
    conv = Conversation.objects.create(
        owner=owner, agent=Agent.objects.get(owner=owner, handle="concierge")
    )
    client.force_login(staff)
    assert client.get("/admin/garden/conversation/").status_code == 200
    assert client.get(f"/admin/garden/conversation/{conv.pk}/change/").status_code == 200


def test_non_staff_cannot_reach_admin(client, owner):
    client.force_login(owner)
    response = client.get("/admin/garden/agent/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
