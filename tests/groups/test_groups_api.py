"""The /api/groups routes: owner-only, CSRF on every write, the rule set's named errors as 400s
that write nothing, deletion with a minute of undo, clear and archive."""

from datetime import timedelta

import pytest
from django.utils import timezone

from garden.models import (
    Agent,
    Artifact,
    Conversation,
    MemoryNote,
    Message,
    ModelAccount,
)
from garden.services.accounts import scripted_account_for
from garden.services.agents import agent_create
from garden.services.conversations import message_append, text_block
from groups.models import Approval, Group, GroupRequest, Membership
from groups.services.groups import group_create
from tests.support.api import assert_refused

pytestmark = pytest.mark.django_db


def make_agent(owner, handle, *, runnable=True, removed=False):
    agent = agent_create(
        owner=owner,
        handle=handle,
        name=handle.title(),
        model_account=scripted_account_for(owner=owner) if runnable else None,
    )
    if removed:
        Agent.objects.filter(pk=agent.pk).update(removed_at=timezone.now())
        agent.refresh_from_db()
    return agent


@pytest.fixture
def team(owner):
    return {
        "concierge": Agent.objects.get(owner=owner, builtin="concierge"),
        "father": Agent.objects.get(owner=owner, builtin="maker"),
        "ledger": make_agent(owner, "ledger"),
        "advisor": make_agent(owner, "advisor"),
        "idle": make_agent(owner, "idle", runnable=False),
        "gone": make_agent(owner, "gone", removed=True),
    }


@pytest.fixture
def group(owner, team):
    return group_create(
        owner=owner, name="Household finances", members=[team["ledger"].pk, team["advisor"].pk]
    )


@pytest.fixture
def their_group(stranger):
    return group_create(owner=stranger, name="Theirs", members=[make_agent(stranger, "scribe").pk])


def counts():
    return (
        Group.objects.count(),
        Membership.objects.count(),
        Conversation.objects.count(),
        Message.objects.count(),
        GroupRequest.objects.count(),
        Approval.objects.count(),
        MemoryNote.objects.count(),
        Agent.objects.count(),
        Artifact.objects.count(),
        list(
            Group.objects.order_by("pk").values_list(
                "name", "coordinator_id", "deleted_at", "archived_at"
            )
        ),
        list(Membership.objects.order_by("pk").values_list("group_id", "agent_id", "position")),
    )


def member_handles(body):
    return [m["handle"] for m in body["members"]]


# --- create, read, list ---------------------------------------------------------------------


def test_create_defaults_to_concierge_and_returns_the_group(api, team):
    response = api.post(
        "/api/groups",
        {"name": "  Household finances ", "members": [team["ledger"].pk, team["advisor"].pk]},
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {
        "id",
        "name",
        "coordinator",
        "members",
        "room_cap_chars",
        "workspace",
        "owner",
        "memory_sentence",
        "created_at",
        "archived_at",
    }
    assert body["name"] == "Household finances"
    # The coordinator's face, the one shape an agent has everywhere.
    concierge = team["concierge"]
    assert body["coordinator"] == {
        "id": concierge.pk,
        "handle": "concierge",
        "name": concierge.name,
        "colour": concierge.colour,
    }
    assert member_handles(body) == ["concierge", "ledger", "advisor"]
    assert body["members"][1] == {
        "id": team["ledger"].pk,
        "handle": "ledger",
        "name": "Ledger",
        "colour": team["ledger"].colour,
        "can_run": True,
        "removed": False,
    }
    assert body["memory_sentence"] == "What is in the room is seen by the room."
    assert body["room_cap_chars"] == 24_000 and body["archived_at"] is None


def test_create_with_a_chosen_coordinator_keeps_the_list_order(api, team):
    response = api.post(
        "/api/groups",
        {
            "name": "Books",
            "coordinator": team["ledger"].pk,
            "members": [team["advisor"].pk, team["ledger"].pk],
        },
    )
    assert response.status_code == 201, response.content
    assert member_handles(response.json()) == ["advisor", "ledger"]
    assert response.json()["coordinator"]["handle"] == "ledger"


def test_list_and_get_show_only_ones_own_groups(api, group, their_group):
    listing = api.get("/api/groups")
    assert listing.status_code == 200
    assert [g["id"] for g in listing.json()] == [group.pk]
    detail = api.get(f"/api/groups/{group.pk}")
    assert detail.status_code == 200 and detail.json()["name"] == "Household finances"


def test_anonymous_is_refused(client, group):
    assert client.get("/api/groups").status_code == 403
    assert client.get(f"/api/groups/{group.pk}").status_code == 403


# --- the rules through the API --------------------------------------------------------------

CREATE_CASES = [
    ("name blank", lambda t: {"name": "   ", "members": [t["ledger"].pk]}, "name", "NAME_REQUIRED"),
    ("name missing", lambda t: {"members": [t["ledger"].pk]}, "name", "NAME_REQUIRED"),
    (
        "name long",
        lambda t: {"name": "x" * 101, "members": [t["ledger"].pk]},
        "name",
        "NAME_TOO_LONG",
    ),
    ("one member", lambda t: {"name": "n", "members": []}, "members", "TOO_FEW_MEMBERS"),
    (
        "idle member",
        lambda t: {"name": "n", "members": [t["idle"].pk]},
        "members",
        "TOO_FEW_MEMBERS",
    ),
    (
        "unknown",
        lambda t: {"name": "n", "members": [t["ledger"].pk, 987654]},
        "members",
        "MEMBER_NOT_FOUND",
    ),
    (
        "foreign",
        lambda t: {"name": "n", "members": [t["ledger"].pk, t["theirs"].pk]},
        "members",
        "MEMBER_NOT_FOUND",
    ),
    (
        "removed",
        lambda t: {"name": "n", "members": [t["ledger"].pk, t["gone"].pk]},
        "members",
        "MEMBER_REMOVED",
    ),
    (
        "maker",
        lambda t: {"name": "n", "members": [t["ledger"].pk, t["father"].pk]},
        "members",
        "MAKER_NOT_ALLOWED",
    ),
    (
        "duplicate",
        lambda t: {"name": "n", "members": [t["ledger"].pk, t["ledger"].pk]},
        "members",
        "DUPLICATE_MEMBER",
    ),
    (
        "coordinator outside",
        lambda t: {
            "name": "n",
            "members": [t["ledger"].pk, t["advisor"].pk],
            "coordinator": t["concierge"].pk,
        },
        "coordinator",
        "COORDINATOR_NOT_MEMBER",
    ),
    (
        "coordinator idle",
        lambda t: {
            "name": "n",
            "coordinator": t["idle"].pk,
            "members": [t["ledger"].pk, t["advisor"].pk, t["idle"].pk],
        },
        "coordinator",
        "COORDINATOR_CANNOT_RUN",
    ),
    (
        "coordinator foreign",
        lambda t: {
            "name": "n",
            "members": [t["ledger"].pk, t["advisor"].pk],
            "coordinator": t["theirs"].pk,
        },
        "coordinator",
        "MEMBER_NOT_FOUND",
    ),
    ("members not ids", lambda t: {"name": "n", "members": ["ledger"]}, "members.0", "invalid"),
]


@pytest.mark.parametrize(
    ("case", "payload", "field", "code"), CREATE_CASES, ids=[c[0] for c in CREATE_CASES]
)
def test_create_refusals_are_400s_with_field_and_code_and_write_nothing(
    api, team, stranger, case, payload, field, code
):
    team = {**team, "theirs": make_agent(stranger, "theirs")}
    before = counts()
    assert_refused(api.post("/api/groups", payload(team)), 400, code, field=field)
    assert counts() == before


CHANGE_CASES = [
    ("name blank", lambda t: {"name": " "}, "name", "NAME_REQUIRED"),
    ("name long", lambda t: {"name": "y" * 101}, "name", "NAME_TOO_LONG"),
    (
        "too few",
        lambda t: {"members": [t["concierge"].pk, t["idle"].pk]},
        "members",
        "TOO_FEW_MEMBERS",
    ),
    (
        "unknown",
        lambda t: {"members": [t["concierge"].pk, t["ledger"].pk, 987654]},
        "members",
        "MEMBER_NOT_FOUND",
    ),
    (
        "foreign",
        lambda t: {"members": [t["concierge"].pk, t["ledger"].pk, t["theirs"].pk]},
        "members",
        "MEMBER_NOT_FOUND",
    ),
    (
        "add removed",
        lambda t: {"members": [t["concierge"].pk, t["ledger"].pk, t["gone"].pk]},
        "members",
        "MEMBER_REMOVED",
    ),
    (
        "add maker",
        lambda t: {"members": [t["concierge"].pk, t["ledger"].pk, t["father"].pk]},
        "members",
        "MAKER_NOT_ALLOWED",
    ),
    (
        "duplicate",
        lambda t: {"members": [t["concierge"].pk, t["ledger"].pk, t["ledger"].pk]},
        "members",
        "DUPLICATE_MEMBER",
    ),
    (
        "coordinator dropped",
        lambda t: {"members": [t["ledger"].pk, t["advisor"].pk]},
        "members",
        "COORDINATOR_NOT_MEMBER",
    ),
    (
        "coordinator outside",
        lambda t: {"coordinator": t["idle"].pk},
        "coordinator",
        "COORDINATOR_CANNOT_RUN",
    ),
    (
        "coordinator not member",
        lambda t: {"coordinator": t["theirs"].pk},
        "coordinator",
        "MEMBER_NOT_FOUND",
    ),
    (
        "coordinator maker",
        lambda t: {"coordinator": t["father"].pk},
        "coordinator",
        "MAKER_NOT_ALLOWED",
    ),
]


@pytest.mark.parametrize(
    ("case", "payload", "field", "code"), CHANGE_CASES, ids=[c[0] for c in CHANGE_CASES]
)
def test_change_refusals_are_400s_with_field_and_code_and_write_nothing(
    api, team, group, stranger, case, payload, field, code
):
    team = {**team, "theirs": make_agent(stranger, "theirs")}
    before = counts()
    assert_refused(api.patch(f"/api/groups/{group.pk}", payload(team)), 400, code, field=field)
    assert counts() == before


def test_a_coordinator_outside_the_members_is_refused_on_change(api, team, group, owner):
    outsider = make_agent(owner, "outsider")
    assert_refused(
        api.patch(f"/api/groups/{group.pk}", {"coordinator": outsider.pk}),
        400,
        "COORDINATOR_NOT_MEMBER",
        field="coordinator",
    )


def test_patch_changes_name_coordinator_and_membership_in_list_order(api, team, group):
    response = api.patch(
        f"/api/groups/{group.pk}",
        {
            "name": "Money",
            "coordinator": team["ledger"].pk,
            "members": [team["advisor"].pk, team["ledger"].pk, team["idle"].pk],
        },
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["name"] == "Money" and body["coordinator"]["handle"] == "ledger"
    assert member_handles(body) == ["advisor", "ledger", "idle"]
    assert body["members"][2]["can_run"] is False
    assert member_handles(api.get(f"/api/groups/{group.pk}").json()) == [
        "advisor",
        "ledger",
        "idle",
    ]


def test_a_removed_member_kept_in_the_list_stays_when_only_the_coordinator_changes(
    api, team, owner
):
    # The Members editor sends the whole list back: a removed member it still names is kept,
    # not re-checked, while the coordinator moves to another member.
    group = group_create(owner=owner, name="Old", members=[team["ledger"].pk, team["advisor"].pk])
    Agent.objects.filter(pk=team["advisor"].pk).update(removed_at=timezone.now())

    changed = api.patch(
        f"/api/groups/{group.pk}",
        {
            "members": [team["concierge"].pk, team["ledger"].pk, team["advisor"].pk],
            "coordinator": team["ledger"].pk,
        },
    )
    assert changed.status_code == 200, changed.content
    assert member_handles(changed.json()) == ["concierge", "ledger", "advisor"]
    assert changed.json()["coordinator"]["id"] == team["ledger"].pk
    assert changed.json()["members"][2]["removed"] is True


def test_a_removed_member_does_not_block_a_rename_and_can_be_taken_out(api, team, owner):
    group = group_create(owner=owner, name="Old", members=[team["ledger"].pk, team["advisor"].pk])
    Agent.objects.filter(pk=team["advisor"].pk).update(removed_at=timezone.now())

    renamed = api.patch(f"/api/groups/{group.pk}", {"name": "New"})
    assert renamed.status_code == 200, renamed.content
    assert renamed.json()["members"][2]["removed"] is True

    # Taking it out leaves only Concierge and Ledger, which still make two that can run.
    taken_out = api.patch(
        f"/api/groups/{group.pk}", {"members": [team["concierge"].pk, team["ledger"].pk]}
    )
    assert taken_out.status_code == 200, taken_out.content
    assert member_handles(taken_out.json()) == ["concierge", "ledger"]

    # Adding it back is bringing it in: refused.
    assert_refused(
        api.patch(
            f"/api/groups/{group.pk}",
            {"members": [team["concierge"].pk, team["ledger"].pk, team["advisor"].pk]},
        ),
        400,
        "MEMBER_REMOVED",
        field="members",
    )


# --- CSRF and ownership on every route ------------------------------------------------------


def write_routes(group_id):
    return [
        ("post", "/api/groups", {"name": "n", "members": []}),
        ("patch", f"/api/groups/{group_id}", {"name": "Renamed"}),
        ("delete", f"/api/groups/{group_id}", None),
        ("post", f"/api/groups/{group_id}/restore", None),
        ("post", f"/api/groups/{group_id}/clear", None),
        ("post", f"/api/groups/{group_id}/archive", None),
    ]


def test_writes_without_csrf_are_forbidden_and_write_nothing(api, team, group):
    group_create(owner=group.owner, name="Second", members=[team["ledger"].pk])
    Conversation.objects.create(owner=group.owner, group=group)
    before = counts()
    for method, path, payload in write_routes(group.pk):
        if path == "/api/groups":
            payload = {"name": "n", "members": [team["ledger"].pk, team["advisor"].pk]}
        response = getattr(api, method)(path, payload, csrf=False)
        assert response.status_code == 403, (method, path, response.content)
        assert "CSRF" in response.json()["message"]
    assert counts() == before


def test_another_users_group_is_404_on_every_route_and_untouched(api, their_group):
    Conversation.objects.create(owner=their_group.owner, group=their_group)
    before = counts()
    assert api.get(f"/api/groups/{their_group.pk}").status_code == 404
    for method, path, payload in write_routes(their_group.pk)[1:]:
        response = getattr(api, method)(path, payload)
        assert response.status_code == 404, (method, path, response.content)
        assert response.json()["code"] == "NOT_FOUND"
    assert counts() == before


def test_unknown_group_is_404(api):
    assert api.get("/api/groups/987654").status_code == 404
    assert api.post("/api/groups/987654/restore").status_code == 404
    assert api.get(f"/api/groups/{2**70}").status_code == 404


# --- delete, undo, restore ------------------------------------------------------------------


def test_delete_answers_undo_until_and_leaves_every_read(api, group, clock):
    t0 = clock.now
    response = api.delete(f"/api/groups/{group.pk}")
    assert response.status_code == 200, response.content
    undo_until = response.json()["undoUntil"]
    assert undo_until == (t0 + timedelta(seconds=60)).isoformat().replace("+00:00", "Z")
    group.refresh_from_db()
    assert group.deleted_at == t0
    assert api.get(f"/api/groups/{group.pk}").status_code == 404
    assert api.get("/api/groups").json() == []
    assert api.patch(f"/api/groups/{group.pk}", {"name": "x"}).status_code == 404
    assert api.delete(f"/api/groups/{group.pk}").status_code == 404


def test_restore_at_59_seconds_brings_it_back_as_it_was(api, group, clock):
    before = api.get(f"/api/groups/{group.pk}").json()
    api.delete(f"/api/groups/{group.pk}")
    clock.advance(59)
    response = api.post(f"/api/groups/{group.pk}/restore")
    assert response.status_code == 200, response.content
    assert response.json() == before
    assert [g["id"] for g in api.get("/api/groups").json()] == [group.pk]


def test_restore_at_61_seconds_is_gone(api, group, clock):
    api.delete(f"/api/groups/{group.pk}")
    clock.advance(61)
    assert_refused(
        api.post(f"/api/groups/{group.pk}/restore"), 410, "UNDO_EXPIRED", field="non_field_errors"
    )
    group.refresh_from_db()
    assert group.deleted_at is not None


def test_restore_of_a_group_that_is_not_deleted_returns_it(api, group):
    response = api.post(f"/api/groups/{group.pk}/restore")
    assert response.status_code == 200 and response.json()["id"] == group.pk


def test_delete_stops_the_active_request_and_rejects_its_approval(api, group, team):
    conversation = Conversation.objects.create(owner=group.owner, group=group)
    active = GroupRequest.objects.create(
        group=group, conversation=conversation, state="awaiting_approval"
    )
    queued = GroupRequest.objects.create(group=group, conversation=conversation, state="queued")
    approval = Approval.objects.create(
        owner=group.owner,
        request=active,
        conversation=conversation,
        agent=team["ledger"],
        tool_call_id="c1",
        action={"name": "files.write", "arguments": {}},
    )
    assert api.delete(f"/api/groups/{group.pk}").status_code == 200
    active.refresh_from_db()
    queued.refresh_from_db()
    approval.refresh_from_db()
    assert (active.state, queued.state, approval.status) == ("stopped", "stopped", "rejected")


def test_delete_and_change_push_one_event_each_after_commit(
    api, group, team, captured_events, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as waiting:
        api.patch(f"/api/groups/{group.pk}", {"name": "Renamed"})
    assert captured_events == []  # nothing is pushed before the commit
    for callback in waiting:
        callback()
    with django_capture_on_commit_callbacks(execute=True):
        api.delete(f"/api/groups/{group.pk}")
    assert [(c, p["type"], p["group"]["name"]) for c, p in captured_events] == [
        (f"group-{group.pk}", "group.updated", "Renamed"),
        (f"group-{group.pk}", "group.deleted", "Renamed"),
    ]


# --- clear and archive ----------------------------------------------------------------------


def test_clear_deletes_every_conversation_and_keeps_group_members_and_memory(api, group, team):
    kept_members = list(group.memberships.values_list("agent_id", "position"))
    artifacts = []
    for n in range(2):
        conv = Conversation.objects.create(
            owner=group.owner, group=group, carried_summary="summary"
        )
        request = GroupRequest.objects.create(
            group=group, conversation=conv, state="running" if n == 0 else "completed"
        )
        message_append(
            conversation_id=conv.pk,
            speaker_kind="owner",
            content=[text_block("hi")],
            request_id=request.pk,
        )
        Approval.objects.create(
            owner=group.owner,
            request=request,
            conversation=conv,
            agent=team["ledger"],
            tool_call_id=f"c{n}",
            action={"name": "x"},
        )
        artifacts.append(
            Artifact.objects.create(
                owner=group.owner, agent=team["ledger"], conversation=conv, title=f"chart {n}"
            )
        )
    one_to_one = Conversation.objects.create(owner=group.owner, agent=team["ledger"])
    MemoryNote.objects.create(owner=group.owner, scope=group.memory_scope, text="save 10%")

    response = api.post(f"/api/groups/{group.pk}/clear")
    assert response.status_code == 200, response.content
    assert response.json() == {"conversations": 2}
    assert not Conversation.objects.filter(group=group).exists()
    assert not GroupRequest.objects.filter(group=group).exists()
    assert Message.objects.count() == 0
    # Approvals stay, detached and decided, so a late decision is answered, not a 404.
    assert Approval.objects.filter(conversation=None, request=None).count() == 2
    assert set(Approval.objects.values_list("status", flat=True)) == {"rejected"}
    assert Conversation.objects.filter(pk=one_to_one.pk).exists()
    assert list(group.memberships.values_list("agent_id", "position")) == kept_members
    assert MemoryNote.objects.filter(scope=group.memory_scope).count() == 1
    assert Artifact.objects.filter(pk__in=[a.pk for a in artifacts], conversation=None).count() == 2
    body = api.get(f"/api/groups/{group.pk}").json()
    assert body["coordinator"]["handle"] == "concierge" and len(body["members"]) == 3
    assert api.post(f"/api/groups/{group.pk}/clear").json() == {"conversations": 0}


def test_archive_hides_from_the_list_and_keeps_the_transcript(api, group):
    conv = Conversation.objects.create(owner=group.owner, group=group)
    message_append(conversation_id=conv.pk, speaker_kind="owner", content=[text_block("hi")])
    response = api.post(f"/api/groups/{group.pk}/archive")
    assert response.status_code == 200, response.content
    assert response.json()["archived_at"] is not None
    assert api.get("/api/groups").json() == []
    assert api.get(f"/api/groups/{group.pk}").status_code == 200
    assert Message.objects.filter(conversation=conv).count() == 1
    again = api.post(f"/api/groups/{group.pk}/archive")
    assert again.json()["archived_at"] == response.json()["archived_at"]


def test_the_starter_team_is_made_once_for_an_empty_roster_and_leaves_a_real_account_alone(
    api, owner, settings
):
    concierge = Agent.objects.get(owner=owner, builtin=Agent.Builtin.CONCIERGE)
    real = ModelAccount.objects.create(
        owner=owner, name="Mine", provider="openai", model="m", options={"temperature": 0}
    )
    Agent.objects.filter(pk=concierge.pk).update(model_account=real)
    made = api.post("/api/groups/starter", {})
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["name"] == "Household finances"
    assert [m["handle"] for m in body["members"]] == ["concierge", "ledger", "advisor"]
    real.refresh_from_db()
    assert real.options == {"temperature": 0}, "an account on a real model is left alone"
    # Paced for a first user to watch (the dashboard's starter, not make demo's team).
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    assert ledger.model_account.options["delay"] == settings.GARDEN_STARTER_PACE_SECONDS > 0
    again = api.post("/api/groups/starter", {})
    assert again.status_code == 409 and again.json()["code"] == "ROSTER_NOT_EMPTY"
    assert Group.objects.filter(owner=owner).count() == 1


def test_the_room_cap_is_set_per_group_within_bounds(api, group, team, settings):
    settings.GARDEN_MAX_ROOM_CAP_CHARS = 100_000
    changed = api.patch(f"/api/groups/{group.pk}", {"room_cap_chars": 50_000})
    assert changed.status_code == 200, changed.content
    assert changed.json()["room_cap_chars"] == 50_000
    group.refresh_from_db()
    assert group.room_cap_chars == 50_000
    for value, code in (
        (3_999, "ROOM_CAP_TOO_SMALL"),
        (-1, "ROOM_CAP_TOO_SMALL"),
        (100_001, "ROOM_CAP_TOO_LARGE"),
    ):
        refused = api.patch(f"/api/groups/{group.pk}", {"room_cap_chars": value, "name": "Renamed"})
        assert refused.status_code == 400, refused.content
        assert {(e["field"], e["code"]) for e in refused.json()["errors"]} == {
            ("room_cap_chars", code)
        }
    refused = api.patch(f"/api/groups/{group.pk}", {"room_cap_chars": "lots"})
    assert refused.status_code == 400
    group.refresh_from_db()
    assert (group.room_cap_chars, group.name) == (50_000, "Household finances")
    created = api.post(
        "/api/groups",
        {
            "name": "Small room",
            "members": [team["ledger"].pk, team["advisor"].pk],
            "room_cap_chars": 8_000,
        },
    )
    assert created.status_code == 201, created.content
    assert created.json()["room_cap_chars"] == 8_000
    before = Group.objects.count()
    refused = api.post(
        "/api/groups",
        {"name": "Tiny", "members": [team["ledger"].pk, team["advisor"].pk], "room_cap_chars": 5},
    )
    assert refused.status_code == 400 and Group.objects.count() == before
