"""What the database itself refuses, whatever the services do: a second active request in a
group, a second room of one agent."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from garden.models import Conversation
from groups.models import Group, GroupRequest

pytestmark = pytest.mark.django_db


def test_the_database_refuses_a_second_active_request_in_a_group(group_factory):
    group = group_factory(concierge_rules=[], members={"ledger": []})
    thread = Conversation.objects.create(owner=group.owner, group=group)
    GroupRequest.objects.create(group=group, conversation=thread, state="running")
    for state in ("running", "awaiting_approval", "synthesizing"):
        with pytest.raises(IntegrityError), transaction.atomic():
            GroupRequest.objects.create(group=group, conversation=thread, state=state)
    # Queued and finished ones are any number.
    GroupRequest.objects.create(group=group, conversation=thread, state="queued")
    GroupRequest.objects.create(group=group, conversation=thread, state="completed")
    assert GroupRequest.objects.filter(group=group).count() == 3


def test_the_database_refuses_a_second_room_for_one_agent(group_factory):
    group = group_factory(concierge_rules=[], members={"ledger": []})
    agent = group.coordinator
    Group.objects.create(owner=group.owner, name="a", coordinator=agent, kind="solo")
    with pytest.raises(IntegrityError), transaction.atomic():
        Group.objects.create(owner=group.owner, name="b", coordinator=agent, kind="solo")
    # It coordinates any number of groups besides.
    Group.objects.create(owner=group.owner, name="c", coordinator=agent)
