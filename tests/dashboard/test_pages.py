"""The dashboard's pages without a browser: who may open what, the roster's two-agent rule,
the room's data, the Canvas fragment, and rundashboard's address parsing."""

from __future__ import annotations

import json

import pytest
from django.core.management.base import CommandError
from django.utils import timezone

from dashboard.management.commands.rundashboard import parse_addrport
from garden.models import Agent, Artifact
from garden.services.conversations import conversation_create
from groups.services.groups import group_delete
from tests.dashboard.helpers import artifact, household, teammate

pytestmark = pytest.mark.django_db

GROUP_RULE = "A group needs two agents; add a teammate."


def test_root_redirects_to_the_dashboard(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == "/dashboard/"


def test_anonymous_people_are_sent_to_the_dashboards_login(client):
    response = client.get("/dashboard/groups/1/")
    assert response.status_code == 302
    assert response["Location"].startswith("/dashboard/login/?next=")


def test_anyone_active_signs_in_to_the_dashboard_but_not_the_admin(client, owner):
    assert not owner.is_staff
    response = client.post(
        "/dashboard/login/",
        {"username": "owner", "password": "pw-owner-123", "next": "/dashboard/"},
    )
    assert response.status_code == 302 and response["Location"] == "/dashboard/"
    assert client.get("/dashboard/").status_code == 200
    assert client.get("/admin/").status_code == 302  # staff keep the ordinary admin


def test_an_inactive_user_cannot_sign_in(client, owner):
    owner.is_active = False
    owner.save()
    response = client.post("/dashboard/login/", {"username": "owner", "password": "pw-owner-123"})
    assert response.status_code == 200 and b"errornote" in response.content


def test_the_roster_asks_for_a_teammate_until_two_besides_agent_father_can_run(signed_in, owner):
    # Agent Father can run but does not count; Concierge counts; a teammate without a model
    # account does not.
    teammate(owner, "ledger", "Ledger", runnable=False)
    page = signed_in.get("/dashboard/").content.decode()
    assert f'<a href="/dashboard/agents/">{GROUP_RULE}</a>' in page
    assert 'id="new-group"' not in page and "create-sheet" not in page

    Agent.objects.filter(owner=owner, handle="ledger").update(
        model_account=Agent.objects.get(owner=owner, builtin="concierge").model_account
    )
    page = signed_in.get("/dashboard/").content.decode()
    assert GROUP_RULE not in page
    assert '<h2 id="groups-heading">Groups</h2>' in page and 'id="new-group"' in page
    assert "What is in the room is seen by the room." in page


def test_the_roster_lists_groups_with_their_faces(signed_in, owner):
    household(owner)
    page = signed_in.get("/dashboard/").content.decode()
    assert 'aria-label="Members: Concierge, Ledger, Finance Advisor"' in page
    assert "Household finances" in page


def test_the_room_carries_its_members_and_routes(signed_in, owner):
    group = household(owner)
    response = signed_in.get(f"/dashboard/groups/{group.pk}/")
    assert response.status_code == 200
    page = response.content.decode()
    data = json.loads(
        page.split('<script id="room-data" type="application/json">')[1].split("</script>")[0]
    )
    assert [m["handle"] for m in data["group"]["members"]] == ["concierge", "ledger", "advisor"]
    assert data["urls"]["socket"] == f"/ws/groups/{group.pk}/"
    # The budget's limits come with each request's payload, not with the page.
    assert "budget" not in data
    for item in ("Members", "Rename…", "Clear history…", "Delete group…"):
        assert f">{item}</button>" in page


def test_another_owners_room_agent_and_canvas_are_404(client, owner, stranger):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    client.force_login(stranger)
    for path in (
        f"/dashboard/groups/{group.pk}/",
        f"/dashboard/groups/{group.pk}/canvas",
        f"/dashboard/agents/{ledger.pk}/",
    ):
        assert client.get(path).status_code == 404, path


def test_a_deleted_group_is_404_at_once(signed_in, owner):
    group = household(owner)
    group_delete(group=group)
    assert signed_in.get(f"/dashboard/groups/{group.pk}/").status_code == 404
    assert f"/dashboard/groups/{group.pk}/" not in signed_in.get("/dashboard/").content.decode()


def test_the_canvas_lists_what_this_group_made_tagged_with_its_agent(signed_in, owner):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    artifact(group, agent=ledger, title="Transactions <March>", content="rent 1,400")
    elsewhere = conversation_create(owner=owner, agent=ledger)
    Artifact.objects.create(
        owner=owner, agent=ledger, conversation=elsewhere, title="Private notes"
    )
    page = signed_in.get(f"/dashboard/groups/{group.pk}/canvas").content.decode()
    assert "Transactions &lt;March&gt;" in page and "Private notes" not in page
    assert 'class="artifact-agent">Ledger<' in page
    assert "rent 1,400" in page


def test_an_agents_page_names_its_groups(signed_in, owner):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    page = signed_in.get(f"/dashboard/agents/{ledger.pk}/").content.decode()
    assert f'href="/dashboard/groups/{group.pk}/"' in page


def test_agents_page_lists_them_with_the_create_form(signed_in, owner):
    Agent.objects.filter(owner=owner, builtin="concierge").update(removed_at=timezone.now())
    page = signed_in.get("/dashboard/agents/").content.decode()
    assert "Agent Father" in page and "Concierge" not in page
    assert 'id="agent-form"' in page


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("8000", ("127.0.0.1", 8000)),
        ("0.0.0.0:9000", ("0.0.0.0", 9000)),
        ("localhost:8001", ("localhost", 8001)),
        ("[::1]:8002", ("::1", 8002)),
    ],
)
def test_rundashboard_reads_an_address(given, expected):
    assert parse_addrport(given) == expected


@pytest.mark.parametrize("given", ["", "host:", "127.0.0.1:99999", "a b:80", "http://x:80"])
def test_rundashboard_refuses_a_bad_address(given):
    with pytest.raises(CommandError):
        parse_addrport(given)


def test_the_starter_team_leaves_the_shared_offline_account_alone(owner):
    from garden.services.accounts import scripted_account_for

    shared = scripted_account_for(owner=owner)
    before = dict(shared.options)
    group = household(owner)
    shared.refresh_from_db()
    assert shared.options == before
    concierge = group.coordinator
    assert concierge.model_account_id != shared.pk
    assert concierge.model_account.name == "Concierge's script"
    # A second run reuses it; Agent Father stays on its own script.
    household(owner)
    assert Agent.objects.get(owner=owner, handle="concierge").model_account_id == (
        concierge.model_account_id
    )
    father = Agent.objects.get(owner=owner, handle="father").model_account
    assert father.name == "Agent Father's script" and father.pk != shared.pk
