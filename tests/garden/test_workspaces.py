"""Workspaces: each person's own, made with them; team workspaces and their people through the
API and the admin, with roles enforced and every refusal named; another workspace is 404."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from garden.models import Workspace, WorkspaceMember
from garden.selectors import workspace_list, workspace_may
from garden.services.workspaces import (
    workspace_create,
    workspace_member_add,
    workspace_member_change,
    workspace_member_remove,
    workspace_personal_ensure,
)
from tests.support.api import sign_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="pw-bob-123")


@pytest.fixture
def team(alice):
    return workspace_create(name="Books team", by=alice)


def test_a_new_person_has_their_own_workspace_with_themselves_its_admin(alice):
    own = Workspace.objects.get(personal_for=alice)
    assert own.kind == "personal" and own.name == "alice's workspace"
    assert list(own.members.values_list("user__username", "role")) == [("alice", "admin")]
    assert workspace_personal_ensure(user=alice) == own  # made once
    assert Workspace.objects.filter(personal_for=alice).count() == 1


def test_a_personal_workspace_is_its_persons_and_a_team_one_is_nobodys(alice):
    with pytest.raises(IntegrityError), transaction.atomic():
        Workspace.objects.create(name="odd", kind="team", personal_for=alice)
    with pytest.raises(IntegrityError), transaction.atomic():
        Workspace.objects.create(name="odd", kind="personal")


def test_roles_carry_their_rights(team, alice, bob):
    viewer = workspace_member_add(workspace=team, user=bob, role="viewer")
    admin = WorkspaceMember.objects.get(workspace=team, user=alice)
    assert [workspace_may(admin, r) for r in ("read", "write", "manage", "approve")] == [True] * 4
    assert [workspace_may(viewer, r) for r in ("read", "write", "manage", "approve")] == [
        True,
        False,
        False,
        False,
    ]
    viewer = workspace_member_change(workspace=team, user=bob, approver=True)
    assert workspace_may(viewer, "approve") and not workspace_may(viewer, "write")
    member = workspace_member_change(workspace=team, user=bob, role="member")
    assert workspace_may(member, "write") and not workspace_may(member, "manage")
    assert not workspace_may(None, "read")


def test_a_workspace_keeps_an_admin_and_a_personal_one_keeps_its_person(team, alice, bob):
    workspace_member_add(workspace=team, user=bob)
    for change in (
        lambda: workspace_member_change(workspace=team, user=alice, role="member"),
        lambda: workspace_member_remove(workspace=team, user=alice),
    ):
        with pytest.raises(Exception) as refused:
            change()
        assert refused.value.code == "WORKSPACE_LAST_ADMIN"
    assert WorkspaceMember.objects.get(workspace=team, user=alice).role == "admin"

    own = Workspace.objects.get(personal_for=alice)
    with pytest.raises(Exception) as refused:
        workspace_member_add(workspace=own, user=bob)
    assert refused.value.code == "WORKSPACE_PERSONAL"
    assert own.members.count() == 1


def test_a_person_is_in_a_workspace_once_and_workspaces_have_limits(team, alice, bob, settings):
    workspace_member_add(workspace=team, user=bob)
    with pytest.raises(Exception) as refused:
        workspace_member_add(workspace=team, user=bob, role="admin")
    assert refused.value.code == "WORKSPACE_MEMBER_EXISTS"

    settings.GARDEN_MAX_PEOPLE_PER_WORKSPACE = 2
    carol = type(alice).objects.create_user(username="carol", password="pw-carol-123")
    with pytest.raises(Exception) as refused:
        workspace_member_add(workspace=team, user=carol)
    assert refused.value.code == "WORKSPACE_FULL"

    settings.GARDEN_MAX_TEAM_WORKSPACES_PER_PERSON = 1
    with pytest.raises(Exception) as refused:
        workspace_create(name="Second team", by=alice)
    assert refused.value.code == "WORKSPACE_LIMIT"
    assert [w.name for w in workspace_list(user=alice)] == ["alice's workspace", "Books team"]


def test_the_api_lists_makes_and_fills_a_team_workspace(alice, bob):
    client = sign_in(alice)
    listed = client.get("/api/workspaces").json()
    assert [(w["name"], w["kind"], w["role"]) for w in listed] == [
        ("alice's workspace", "personal", "admin")
    ]

    made = client.post("/api/workspaces", {"name": "  Books team  "})
    assert made.status_code == 201, made.content
    team = made.json()
    assert (team["name"], team["kind"], team["role"], team["member_count"]) == (
        "Books team",
        "team",
        "admin",
        1,
    )
    assert client.post("/api/workspaces", {"name": " "}).status_code == 400
    assert client.post("/api/workspaces", {"name": "x" * 101}).status_code == 400

    members = f"/api/workspaces/{team['id']}/members"
    added = client.post(members, {"username": "bob", "role": "viewer"})
    assert added.status_code == 201, added.content
    assert added.json()["role"] == "viewer" and added.json()["username"] == "bob"
    unknown = client.post(members, {"username": "nobody"})
    assert (unknown.status_code, unknown.json()["code"]) == (404, "NOT_FOUND")
    bad_role = client.post(members, {"username": "bob", "role": "owner"})
    assert bad_role.status_code == 400
    assert [m["username"] for m in client.get(members).json()] == ["alice", "bob"]

    # Bob sees it as a viewer, reads its people, but may not change them; he may leave.
    as_bob = sign_in(bob)
    assert [(w["name"], w["role"]) for w in as_bob.get("/api/workspaces").json()] == [
        ("bob's workspace", "admin"),
        ("Books team", "viewer"),
    ]
    assert as_bob.get(members).status_code == 200
    refused = as_bob.patch(f"{members}/{bob.pk}", {"role": "admin"})
    assert (refused.status_code, refused.json()["code"]) == (403, "WORKSPACE_ROLE")
    refused = as_bob.delete(f"{members}/{alice.pk}")
    assert (refused.status_code, refused.json()["code"]) == (403, "WORKSPACE_ROLE")

    promoted = client.patch(f"{members}/{bob.pk}", {"approver": True})
    assert promoted.status_code == 200 and promoted.json()["approver"] is True
    last = client.patch(f"{members}/{alice.pk}", {"role": "member"})
    assert (last.status_code, last.json()["code"]) == (409, "WORKSPACE_LAST_ADMIN")

    assert as_bob.delete(f"{members}/{bob.pk}").status_code == 204
    gone = as_bob.get(members)
    assert (gone.status_code, gone.json()["code"]) == (404, "NOT_FOUND")
    assert [m["username"] for m in client.get(members).json()] == ["alice"]


def test_another_persons_workspace_is_not_found(alice, bob, team):
    as_bob = sign_in(bob)
    own = Workspace.objects.get(personal_for=alice)
    for workspace in (team, own):
        base = f"/api/workspaces/{workspace.pk}/members"
        for response in (
            as_bob.get(base),
            as_bob.post(base, {"username": "bob"}),
            as_bob.patch(f"{base}/{alice.pk}", {"role": "viewer"}),
            as_bob.delete(f"{base}/{alice.pk}"),
        ):
            assert (response.status_code, response.json()["code"]) == (404, "NOT_FOUND")
    assert WorkspaceMember.objects.filter(user=bob).count() == 1  # his own only


def test_a_personal_workspace_takes_nobody_else_through_the_api(alice, bob):
    own = Workspace.objects.get(personal_for=alice)
    refused = sign_in(alice).post(f"/api/workspaces/{own.pk}/members", {"username": "bob"})
    assert (refused.status_code, refused.json()["code"]) == (400, "WORKSPACE_PERSONAL")
    assert own.members.count() == 1


def test_staff_make_a_team_workspace_in_the_admin_and_it_keeps_an_admin(admin_client, alice, bob):
    assert admin_client.get("/admin/garden/workspace/").status_code == 200
    assert admin_client.get("/admin/garden/workspace/add/").status_code == 200
    form = {
        "name": "Ops",
        "members-TOTAL_FORMS": "2",
        "members-INITIAL_FORMS": "0",
        "members-MIN_NUM_FORMS": "1",
        "members-MAX_NUM_FORMS": "1000",
        "members-0-user": str(alice.pk),
        "members-0-role": "viewer",
        "members-1-user": str(bob.pk),
        "members-1-role": "member",
    }
    refused = admin_client.post("/admin/garden/workspace/add/", form)
    assert refused.status_code == 200
    assert b"keeps at least one admin" in refused.content
    assert not Workspace.objects.filter(name="Ops").exists()

    form["members-0-role"] = "admin"
    made = admin_client.post("/admin/garden/workspace/add/", form)
    assert made.status_code == 302, made.content[:2000]
    ops = Workspace.objects.get(name="Ops")
    assert ops.kind == "team"
    assert sorted(ops.members.values_list("user__username", "role")) == [
        ("alice", "admin"),
        ("bob", "member"),
    ]
    assert admin_client.get(f"/admin/garden/workspace/{ops.pk}/change/").status_code == 200

    own = Workspace.objects.get(personal_for=alice)
    page = admin_client.get(f"/admin/garden/workspace/{own.pk}/change/")
    assert page.status_code == 200
    assert (
        admin_client.post(f"/admin/garden/workspace/{own.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert Workspace.objects.filter(pk=own.pk).exists()
