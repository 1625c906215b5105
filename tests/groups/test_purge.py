"""The purge: after the minute the next group-list read removes exactly what the seed lists
(conversations and what cascades from them, member rows, the row, its memory scope) and
nothing else; agents and artifacts remain. Beat runs it too, for groups nobody reads; a read
that finds more than it may remove at once leaves the rest to a worker."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
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
from groups.models import Approval, CallReservation, Group, GroupRequest, Membership
from groups.services.groups import (
    group_create,
    group_delete,
    group_purge_expired,
    purge_due_groups_on_read,
)
from groups.tasks import purge_deleted_groups

pytestmark = pytest.mark.django_db

TABLES = [
    get_user_model(),
    ModelAccount,
    Agent,
    Group,
    Membership,
    Conversation,
    Message,
    GroupRequest,
    CallReservation,
    Approval,
    MemoryNote,
    Artifact,
]


def table_counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in TABLES}


def make_group(owner, name):
    account = scripted_account_for(owner=owner)
    members = [
        agent_create(owner=owner, handle=f"{name}-{n}", name=f"{name} {n}", model_account=account)
        for n in range(2)
    ]
    return group_create(owner=owner, name=name, members=[m.pk for m in members])


def populate(group, *, conversations=2) -> dict[str, int]:
    """Give ``group`` a transcript with requests, reservations, approvals, artifacts and
    memory; returns how many rows of each table belong to it (the artifacts do not)."""
    member = group.memberships.order_by("position").last().agent
    owner = group.owner
    for n in range(conversations):
        conv = Conversation.objects.create(owner=owner, group=group, carried_summary="so far")
        request = GroupRequest.objects.create(group=group, conversation=conv, state="completed")
        owner_turn = message_append(
            conversation_id=conv.pk,
            speaker_kind="owner",
            content=[text_block("review spending")],
            request_id=request.pk,
        )
        message_append(
            conversation_id=conv.pk,
            speaker_kind="agent",
            speaker_agent=member,
            content=[text_block("done")],
            request_id=request.pk,
            in_reply_to=owner_turn,
        )
        GroupRequest.objects.filter(pk=request.pk).update(message=owner_turn)
        for purpose in ("working", "synthesis"):
            CallReservation.objects.create(request=request, purpose=purpose, agent=member, fence=1)
        Approval.objects.create(
            owner=owner,
            request=request,
            conversation=conv,
            agent=member,
            tool_call_id=f"call-{n}",
            action={"name": "files.write"},
            status="approved",
        )
        Artifact.objects.create(owner=owner, agent=member, conversation=conv, title=f"chart {n}")
    MemoryNote.objects.create(owner=owner, scope=group.memory_scope, text="save 10%")
    MemoryNote.objects.create(
        owner=owner, scope=group.memory_scope, kind="preference", text="euros"
    )
    return {
        "Group": 1,
        "Membership": group.memberships.count(),
        "Conversation": conversations,
        "Message": 2 * conversations,
        "GroupRequest": conversations,
        "CallReservation": 2 * conversations,
        "Approval": conversations,
        "MemoryNote": 2,
    }


@pytest.fixture
def world(owner, stranger):
    """The doomed group beside everything the purge must leave alone."""
    doomed = make_group(owner, "doomed")
    owned = populate(doomed)
    kept = make_group(owner, "kept")
    populate(kept, conversations=1)
    recent = make_group(owner, "recent")  # deleted later, within the minute
    theirs = make_group(stranger, "theirs")
    populate(theirs, conversations=1)
    one_to_one = Conversation.objects.create(owner=owner, agent=doomed.coordinator)
    message_append(conversation_id=one_to_one.pk, speaker_kind="owner", content=[text_block("hi")])
    MemoryNote.objects.create(owner=owner, scope=f"private:{doomed.coordinator_id}", text="mine")
    MemoryNote.objects.create(owner=owner, scope=f"shared:{owner.pk}", text="shared")
    return {"doomed": doomed, "owned": owned, "kept": kept, "recent": recent, "theirs": theirs}


def test_after_the_minute_the_purge_removes_exactly_the_group(api, owner, world, clock):
    doomed = world["doomed"]
    doomed_agents = list(doomed.memberships.values_list("agent_id", flat=True))
    doomed_artifacts = list(
        Artifact.objects.filter(conversation__group=doomed).values_list("pk", flat=True)
    )
    t0 = clock.now
    assert api.delete(f"/api/groups/{doomed.pk}").status_code == 200
    group_delete(group=world["theirs"], now=t0)
    before = table_counts()

    clock.now = t0 + timedelta(seconds=30)
    assert api.delete(f"/api/groups/{world['recent'].pk}").status_code == 200

    clock.now = t0 + timedelta(seconds=59)
    assert purge_due_groups_on_read(owner=owner) == 0, "nothing is due within the minute"
    purge_deleted_groups.apply(kwargs={"owner_id": owner.pk})
    assert api.get("/api/groups").status_code == 200
    assert table_counts() == before, "nothing goes within the minute"

    clock.now = t0 + timedelta(seconds=61)
    # No worker runs here: the read itself removes the group for good.
    listing = api.get("/api/groups")
    assert [g["name"] for g in listing.json()] == ["kept"]

    after = table_counts()
    # The group's calls stay counted (their reservations outlive their requests, for the
    # owner's usage); everything else it owned goes.
    owned = {**world["owned"], "CallReservation": 0}
    expected = {name: count - owned.get(name, 0) for name, count in before.items()}
    assert after == expected
    assert CallReservation.objects.filter(request=None).count() == world["owned"]["CallReservation"]
    assert not Group.objects.filter(pk=doomed.pk).exists()
    assert not MemoryNote.objects.filter(scope=doomed.memory_scope).exists()
    # Its agents are never touched; files it made keep their row, without the thread.
    assert Agent.objects.filter(pk__in=doomed_agents, removed_at=None).count() == len(doomed_agents)
    assert Artifact.objects.filter(pk__in=doomed_artifacts, conversation=None).count() == 2
    # The group deleted 31 s ago and another owner's expired group are still there.
    assert Group.objects.filter(pk=world["recent"].pk, deleted_at__isnull=False).exists()
    assert Group.objects.filter(pk=world["theirs"].pk).exists()
    # After the purge there is nothing left to restore.
    assert api.post(f"/api/groups/{doomed.pk}/restore").status_code == 404


def test_purge_is_idempotent_and_only_the_owners(owner, stranger, world, clock):
    t0 = clock.now
    group_delete(group=world["doomed"], now=t0)
    group_delete(group=world["theirs"], now=t0)
    later = t0 + timedelta(seconds=61)
    assert group_purge_expired(owner_id=owner.pk, now=later) == 1
    assert group_purge_expired(owner_id=owner.pk, now=later) == 0
    assert Group.objects.filter(pk=world["theirs"].pk).exists()
    assert group_purge_expired(now=later) == 1, "beat's run: every owner's"
    assert not Group.objects.filter(pk=world["theirs"].pk).exists()


@pytest.mark.postgres
def test_purge_on_postgres_cascades_the_same(api, owner, world, clock):
    """The same purge under PostgreSQL's FK enforcement and row locks."""
    t0 = clock.now
    api.delete(f"/api/groups/{world['doomed'].pk}")
    before = table_counts()
    clock.now = t0 + timedelta(seconds=61)
    purge_deleted_groups.apply(kwargs={"owner_id": owner.pk})
    owned = {**world["owned"], "CallReservation": 0}  # calls stay counted, without a request
    expected = {name: count - owned.get(name, 0) for name, count in before.items()}
    assert table_counts() == expected


def test_the_roster_page_read_removes_the_group_too(owner, world, clock):
    from django.test import Client

    group_delete(group=world["doomed"], now=clock.now)
    clock.advance(61)
    client = Client()
    client.force_login(owner)
    assert client.get("/dashboard/").status_code == 200
    assert not Group.objects.filter(pk=world["doomed"].pk).exists()


def test_a_read_removes_a_bounded_number_and_asks_a_worker_for_the_rest_once(
    owner, world, clock, monkeypatch, settings
):
    sent = []
    monkeypatch.setattr("groups.services.groups.scheduling.purge_deleted_groups_soon", sent.append)
    settings.GARDEN_PURGE_ON_READ = 1
    group_delete(group=world["doomed"], now=clock.now)
    group_delete(group=world["recent"], now=clock.now)
    clock.advance(61)
    assert purge_due_groups_on_read(owner=owner) == 1
    assert Group.objects.filter(owner=owner, deleted_at__isnull=False).count() == 1
    assert sent == [owner.pk], "the one left is a worker's"
    for _ in range(3):  # reads in a row: one each, and the worker asked once in all
        purge_due_groups_on_read(owner=owner)
    assert not Group.objects.filter(owner=owner, deleted_at__isnull=False).exists()
    assert sent == [owner.pk]


def test_approvals_a_clear_detached_go_with_the_group_and_their_telegram_messages(owner, clock):
    """A clear detaches its approvals (decided, no thread, no request) so a late decision
    finds them decided; the group's removal for good takes them too, with their Telegram
    message rows."""
    from groups.services.groups import group_clear
    from groups.services.requests import request_create
    from telegram_approvals.models import TelegramApprovalMessage
    from tests.groups.conftest import make_group as team
    from tests.groups.helpers import WRITE
    from tests.support.driving import drive

    group = team(
        owner,
        concierge_rules=[],
        members={"ledger": [{"reply": {"tool_calls": [WRITE]}}], "advisor": []},
    )
    Agent.objects.filter(owner=owner, handle="ledger").update(
        enabled_tools=["file.write"], approval_tools=["file.write"]
    )
    request = request_create(group=group, text="@ledger write it down")
    drive(request, "awaiting_approval")
    approval = Approval.objects.get(request=request)
    TelegramApprovalMessage.objects.create(
        approval=approval, chat_id=1, message_id=2, claimed_at=timezone.now()
    )
    group_clear(group=group)
    approval.refresh_from_db()
    assert (approval.conversation_id, approval.request_id, approval.status) == (
        None,
        None,
        "rejected",
    )
    t0 = clock.now
    group_delete(group=group, now=t0)
    clock.now = t0 + timedelta(seconds=61)
    assert group_purge_expired(owner_id=owner.pk, now=clock.now) == 1
    assert not Approval.objects.filter(pk=approval.pk).exists()
    assert not TelegramApprovalMessage.objects.exists()
