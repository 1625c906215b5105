"""Admin for groups: staff list and edit under the same rule set as the API; deleted groups
are hidden unless asked for; requests and reservations are read-only."""

import pytest
from django.utils import timezone

from garden.models import Agent, Conversation
from garden.services.accounts import scripted_account_for
from garden.services.agents import agent_create
from groups.models import CallReservation, Group, GroupRequest
from groups.services.groups import group_archive, group_create, group_delete

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(django_user_model, client):
    user = django_user_model.objects.create_superuser(username="staff", password="pw-staff-123")
    client.force_login(user)
    return user


@pytest.fixture
def team(owner):
    account = scripted_account_for(owner=owner)
    return {
        "concierge": Agent.objects.get(owner=owner, builtin="concierge"),
        "father": Agent.objects.get(owner=owner, builtin="maker"),
        "ledger": agent_create(owner=owner, handle="ledger", name="Ledger", model_account=account),
        "advisor": agent_create(
            owner=owner, handle="advisor", name="Advisor", model_account=account
        ),
    }


@pytest.fixture
def group(owner, team):
    return group_create(
        owner=owner, name="Household", members=[team["ledger"].pk, team["advisor"].pk]
    )


def change_form(group, *, name=None, coordinator=None, members=None, room_cap=None):
    """The POST the admin's change page sends: the group's fields and the membership inline."""
    rows = list(group.memberships.order_by("position"))
    members = [m.agent_id for m in rows] if members is None else members
    data = {
        "name": group.name if name is None else name,
        "coordinator": group.coordinator_id if coordinator is None else coordinator,
        "room_cap_chars": str(group.room_cap_chars if room_cap is None else room_cap),
        "memberships-TOTAL_FORMS": str(max(len(rows), len(members))),
        "memberships-INITIAL_FORMS": str(len(rows)),
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    for i in range(max(len(rows), len(members))):
        if i < len(rows):
            data[f"memberships-{i}-id"] = str(rows[i].pk)
        data[f"memberships-{i}-group"] = str(group.pk)
        if i < len(members):
            data[f"memberships-{i}-agent"] = str(members[i])
            data[f"memberships-{i}-position"] = str(i)
        else:
            data[f"memberships-{i}-agent"] = str(rows[i].agent_id)
            data[f"memberships-{i}-position"] = str(i)
            data[f"memberships-{i}-DELETE"] = "on"
    return data


def test_staff_list_groups_with_owner_members_coordinator_and_state(
    client, staff, group, owner, team
):
    archived = group_create(owner=owner, name="Old books", members=[team["ledger"].pk])
    group_archive(group=archived)
    page = client.get("/admin/groups/group/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Household" in html and "owner" in html
    assert "@concierge, @ledger, @advisor" in html
    assert "active" in html and "archived" in html


def test_deleted_groups_are_hidden_unless_the_filter_asks(client, staff, group, owner, team):
    gone = group_create(owner=owner, name="Shredded", members=[team["ledger"].pk])
    group_delete(group=gone)
    default = client.get("/admin/groups/group/").content.decode()
    assert "Household" in default and "Shredded" not in default
    deleted = client.get("/admin/groups/group/?deleted=yes").content.decode()
    assert "Shredded" in deleted and "Household" not in deleted
    # A deleted group opens read-only.
    page = client.get(f"/admin/groups/group/{gone.pk}/change/")
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()


def test_a_valid_change_goes_through_the_service(client, staff, group, team):
    assert client.get(f"/admin/groups/group/{group.pk}/change/").status_code == 200
    data = change_form(
        group,
        name="  Money  ",
        coordinator=team["ledger"].pk,
        members=[team["advisor"].pk, team["ledger"].pk, team["concierge"].pk],
    )
    response = client.post(f"/admin/groups/group/{group.pk}/change/", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    group.refresh_from_db()
    assert group.name == "Money" and group.coordinator_id == team["ledger"].pk
    assert list(group.memberships.order_by("position").values_list("agent__handle", flat=True)) == [
        "advisor",
        "ledger",
        "concierge",
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: {"name": "   "}, "A group needs a name."),
        (
            lambda t: {"coordinator": t["father"].pk},
            "Agent Father cannot join a group: the maker&#x27;s platform tools stay outside the room.",
        ),
        (
            # Ledger out and an agent that cannot run in: a change that brings a member in is
            # checked as creation is (taking Ledger out alone would be allowed).
            lambda t: {
                "members": [
                    t["concierge"].pk,
                    t["advisor"].pk,
                    Agent.objects.create(owner=t["concierge"].owner, handle="idle", name="Idle").pk,
                ]
            },
            "A group needs 2 members besides Agent Father that can run.",
        ),
        (
            lambda t: {
                "members": [t["concierge"].pk, t["ledger"].pk, t["advisor"].pk, t["father"].pk]
            },
            "Agent Father cannot join a group",
        ),
        (
            lambda t: {"members": [t["ledger"].pk, t["advisor"].pk]},
            "The coordinator stays a member; choose another coordinator before taking it out.",
        ),
    ],
    ids=["name", "maker coordinator", "too few", "maker member", "coordinator dropped"],
)
def test_an_invalid_change_shows_the_rules_message_and_writes_nothing(
    client, staff, group, team, change, message
):
    # Advisor leaves garden so that Concierge and Ledger alone are not enough.
    Agent.objects.filter(pk=team["advisor"].pk).update(model_account=None)
    before = (
        group.name,
        group.coordinator_id,
        list(group.memberships.values_list("agent_id", "position")),
    )
    response = client.post(
        f"/admin/groups/group/{group.pk}/change/", change_form(group, **change(team))
    )
    assert response.status_code == 200
    assert message in response.content.decode()
    group.refresh_from_db()
    assert (
        group.name,
        group.coordinator_id,
        list(group.memberships.values_list("agent_id", "position")),
    ) == before


def test_a_removed_member_does_not_block_a_rename_in_the_admin(client, staff, group, team):
    Agent.objects.filter(pk=team["advisor"].pk).update(removed_at=timezone.now())
    response = client.post(
        f"/admin/groups/group/{group.pk}/change/", change_form(group, name="Renamed")
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    group.refresh_from_db()
    assert group.name == "Renamed"


def test_requests_and_reservations_are_listed_read_only(client, staff, group, team):
    conv = Conversation.objects.create(owner=group.owner, group=group)
    request = GroupRequest.objects.create(
        group=group,
        conversation=conv,
        state="completed",
        working_reserved=3,
        synthesis_reserved=1,
        outcome_code="DONE",
    )
    CallReservation.objects.create(
        request=request, purpose="working", agent=team["ledger"], fence=1, status="consumed"
    )
    listing = client.get("/admin/groups/grouprequest/").content.decode()
    assert "completed" in listing.lower() and "DONE" in listing
    assert client.get("/admin/groups/callreservation/").status_code == 200
    detail = client.get(f"/admin/groups/grouprequest/{request.pk}/change/").content.decode()
    assert 'name="_save"' not in detail
    assert client.get("/admin/groups/grouprequest/add/").status_code == 403
    assert client.post(f"/admin/groups/grouprequest/{request.pk}/delete/").status_code == 403


def test_admin_has_no_add_and_no_hard_delete_for_groups(client, staff, group):
    assert client.get("/admin/groups/group/add/").status_code == 403
    assert (
        client.post(f"/admin/groups/group/{group.pk}/delete/", {"post": "yes"}).status_code == 403
    )
    assert Group.objects.filter(pk=group.pk).exists()


def test_non_staff_cannot_reach_the_groups_admin(client, owner):
    client.force_login(owner)
    response = client.get("/admin/groups/group/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_the_room_cap_is_set_in_the_admin_within_bounds(client, staff, group):
    client.force_login(staff)
    url = f"/admin/groups/group/{group.pk}/change/"
    refused = client.post(url, change_form(group, room_cap=100))
    assert refused.status_code == 200
    assert "A room cap is at least 4,000 characters." in refused.content.decode()
    group.refresh_from_db()
    assert group.room_cap_chars == 24_000
    saved = client.post(url, change_form(group, room_cap=12_000))
    assert saved.status_code == 302, saved.content.decode()[-2000:]
    group.refresh_from_db()
    assert group.room_cap_chars == 12_000
