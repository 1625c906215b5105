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


def test_the_admin_speaks_of_garden_and_lists_no_permission_groups(client, staff):
    client.force_login(staff)
    index = client.get("/admin/").content.decode()
    assert "garden administration" in index and "Django administration" not in index
    assert "/admin/auth/group/" not in index, "Django's groups beside garden's"
    assert "/admin/groups/group/" in index


def test_a_new_agent_takes_the_next_colour_so_faces_differ(owner):
    from garden.services.accounts import scripted_account_for
    from garden.services.agents import agent_create

    account = scripted_account_for(owner=owner)
    made = [
        agent_create(owner=owner, handle=f"a{i}", name=f"A{i}", model_account=account)
        for i in range(3)
    ]
    assert len({a.colour for a in made}) == 3
    chosen = agent_create(
        owner=owner, handle="c", name="C", model_account=account, colour="#123456"
    )
    assert chosen.colour == "#123456"


def test_the_site_has_a_favicon(client):
    from django.contrib.staticfiles import finders

    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("dashboard/favicon.svg")
    assert finders.find("dashboard/favicon.svg")


def test_staff_read_and_remove_the_pages_agents_visited_but_add_or_change_none(
    client, staff, owner
):
    from garden.models import PageVisit

    conv = Conversation.objects.create(
        owner=owner, agent=Agent.objects.get(owner=owner, handle="concierge")
    )
    visit = PageVisit.objects.create(
        owner=owner, conversation=conv, url="http://127.0.0.1/x", status=200, excerpt="<b>x</b>"
    )
    client.force_login(staff)
    listing = client.get("/admin/garden/pagevisit/")
    assert listing.status_code == 200 and "http://127.0.0.1/x" in listing.content.decode()
    page = client.get(f"/admin/garden/pagevisit/{visit.pk}/change/")
    assert page.status_code == 200 and "&lt;b&gt;x&lt;/b&gt;" in page.content.decode()
    assert client.get("/admin/garden/pagevisit/add/").status_code == 403
    client.post(f"/admin/garden/pagevisit/{visit.pk}/change/", {"url": "http://elsewhere/"})
    visit.refresh_from_db()
    assert visit.url == "http://127.0.0.1/x"
    removed = client.post(f"/admin/garden/pagevisit/{visit.pk}/delete/", {"post": "yes"})
    assert removed.status_code == 302 and not PageVisit.objects.exists()


def test_staff_see_which_beat_holds_the_lease_but_change_nothing(client, staff):
    from garden.beat import lease_take
    from garden.models import BeatLease

    assert lease_take(holder="host-a:123:abc", seconds=30)
    lease = BeatLease.objects.get()
    client.force_login(staff)
    listing = client.get("/admin/garden/beatlease/")
    assert listing.status_code == 200 and "host-a:123:abc" in listing.content.decode()
    assert client.get("/admin/garden/beatlease/add/").status_code == 403
    client.post(f"/admin/garden/beatlease/{lease.pk}/change/", {"holder": "someone"})
    client.post(f"/admin/garden/beatlease/{lease.pk}/delete/", {"post": "yes"})
    assert BeatLease.objects.get().holder == "host-a:123:abc"
