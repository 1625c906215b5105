"""The maker's tools: Agent Father changes and archives its owner's groups through the same
services and rules as the dashboard; nobody else may call them."""

import json

import jsonschema
import pytest
from django.utils import timezone

from garden.models import Agent
from garden.services.accounts import scripted_account_for
from garden.services.agents import agent_create
from garden.tools import ToolContext, check_arguments, get_tool
from groups import selectors
from groups.models import Group
from groups.platform_tools import (
    ARCHIVE_GROUP,
    UPDATE_GROUP,
    platform_archive_group,
    platform_update_group,
)
from groups.services.groups import group_create, group_delete

pytestmark = pytest.mark.django_db


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


def snapshot(group):
    group = Group.objects.get(pk=group.pk)
    return (
        group.name,
        group.coordinator_id,
        group.archived_at,
        list(group.memberships.order_by("position").values_list("agent_id", flat=True)),
    )


def test_specs_are_tool_specs_with_valid_json_schemas():
    for spec in (UPDATE_GROUP, ARCHIVE_GROUP):
        jsonschema.Draft202012Validator.check_schema(spec.parameters)
        assert get_tool(spec.name).spec is spec
    assert UPDATE_GROUP.name == "platform.update_group"
    assert ARCHIVE_GROUP.name == "platform.archive_group"


def test_the_maker_renames_reorders_and_changes_the_coordinator(team, group):
    result = platform_update_group(
        agent=team["father"],
        arguments={
            "group_id": group.pk,
            "name": "  Money ",
            "members": ["@advisor", "ledger"],
            "coordinator": "@ledger",
        },
    )
    assert result == {
        "group": {
            "id": group.pk,
            "name": "Money",
            "coordinator": "ledger",
            "members": ["advisor", "ledger"],
            "archived": False,
        }
    }
    json.dumps(result)
    assert snapshot(group)[3] == [team["advisor"].pk, team["ledger"].pk]


@pytest.mark.parametrize(
    ("arguments", "code", "field"),
    [
        (lambda g, t: {"group_id": g.pk, "name": "   "}, "NAME_REQUIRED", "name"),
        (
            lambda g, t: {"group_id": g.pk, "members": ["concierge", "ledger", "father"]},
            "MAKER_NOT_ALLOWED",
            "members",
        ),
        (
            lambda g, t: {"group_id": g.pk, "members": ["concierge", "ledger", "ghost"]},
            "MEMBER_NOT_FOUND",
            "members",
        ),
        (
            lambda g, t: {"group_id": g.pk, "members": ["ledger", "advisor"]},
            "COORDINATOR_NOT_MEMBER",
            "members",
        ),
        (
            lambda g, t: {"group_id": g.pk, "coordinator": "father"},
            "MAKER_NOT_ALLOWED",
            "coordinator",
        ),
        (
            lambda g, t: {"group_id": g.pk, "members": ["concierge", "ledger", "ledger"]},
            "DUPLICATE_MEMBER",
            "members",
        ),
        (lambda g, t: {"group_id": g.pk}, "NOTHING_TO_CHANGE", None),
        (lambda g, t: {"group_id": g.pk, "colour": "red"}, "INVALID_ARGUMENTS", None),
        (lambda g, t: {"group_id": "one", "name": "x"}, "INVALID_ARGUMENTS", "group_id"),
        (lambda g, t: {"group_id": 987654, "name": "x"}, "GROUP_NOT_FOUND", "group_id"),
    ],
    ids=[
        "name",
        "maker member",
        "unknown",
        "coordinator dropped",
        "maker coordinator",
        "duplicate",
        "nothing",
        "extra argument",
        "bad id",
        "unknown group",
    ],
)
def test_update_refusals_are_named_errors_and_write_nothing(team, group, arguments, code, field):
    before = snapshot(group)
    result = platform_update_group(agent=team["father"], arguments=arguments(group, team))
    assert result["error"]["code"] == code, result
    assert result["error"]["field"] == field and result["error"]["message"]
    json.dumps(result)
    assert snapshot(group) == before


def test_only_what_the_change_brings_in_is_checked(team, group, owner):
    gone = agent_create(
        owner=owner, handle="gone", name="Gone", model_account=team["ledger"].model_account
    )
    Agent.objects.filter(pk=team["advisor"].pk).update(removed_at=timezone.now())
    assert "group" in platform_update_group(
        agent=team["father"], arguments={"group_id": group.pk, "name": "Renamed"}
    )
    Agent.objects.filter(pk=gone.pk).update(removed_at=timezone.now())
    added = platform_update_group(
        agent=team["father"],
        arguments={"group_id": group.pk, "members": ["concierge", "ledger", "advisor", "gone"]},
    )
    assert added["error"]["code"] == "MEMBER_REMOVED"
    removed = platform_update_group(
        agent=team["father"], arguments={"group_id": group.pk, "members": ["concierge", "ledger"]}
    )
    assert removed["group"]["members"] == ["concierge", "ledger"]


def test_another_owners_group_and_a_deleted_group_are_not_found(team, group, stranger):
    theirs = group_create(
        owner=stranger,
        name="Theirs",
        members=[
            agent_create(
                owner=stranger,
                handle="scribe",
                name="Scribe",
                model_account=scripted_account_for(owner=stranger),
            ).pk
        ],
    )
    for target in (theirs, group):
        if target is group:
            group_delete(group=group)
        before = snapshot(target)
        for call, arguments in (
            (platform_update_group, {"group_id": target.pk, "name": "Mine"}),
            (platform_archive_group, {"group_id": target.pk}),
        ):
            result = call(agent=team["father"], arguments=arguments)
            assert result["error"]["code"] == "GROUP_NOT_FOUND"
        assert snapshot(target) == before


def test_the_maker_archives_a_group(team, group, owner):
    result = platform_archive_group(agent=team["father"], arguments={"group_id": group.pk})
    assert result["group"]["archived"] is True
    assert list(selectors.group_list(person=owner)) == []
    assert selectors.group_get(person=owner, group_id=group.pk) is not None


@pytest.mark.parametrize("handle", ["concierge", "ledger"])
def test_non_maker_agents_are_refused(team, group, handle):
    before = snapshot(group)
    for call, arguments in (
        (platform_update_group, {"group_id": group.pk, "name": "Mine"}),
        (platform_archive_group, {"group_id": group.pk}),
    ):
        assert call(agent=team[handle], arguments=arguments)["error"]["code"] == "MAKER_ONLY"
    assert snapshot(group) == before


def test_a_removed_maker_is_refused(team, group):
    Agent.objects.filter(pk=team["father"].pk).update(removed_at=timezone.now())
    team["father"].refresh_from_db()
    result = platform_archive_group(agent=team["father"], arguments={"group_id": group.pk})
    assert result["error"]["code"] == "MAKER_ONLY"


def test_registry_handlers_take_the_caller_from_the_trusted_context(team, group, owner, stranger):
    tool = get_tool("platform.update_group")
    arguments = {"group_id": group.pk, "name": "Via registry"}
    assert check_arguments(tool, arguments) is None
    ctx = ToolContext(owner_id=owner.pk, agent_id=team["father"].pk, conversation_id=0)
    outcome = tool.handler(ctx, arguments)
    assert not outcome.is_error and json.loads(outcome.content)["group"]["name"] == "Via registry"
    # A context naming the maker under another owner finds no caller.
    forged = ToolContext(owner_id=stranger.pk, agent_id=team["father"].pk, conversation_id=0)
    refused = get_tool("platform.archive_group").handler(forged, {"group_id": group.pk})
    assert refused.is_error and refused.code == "MAKER_ONLY"
    as_member = ToolContext(owner_id=owner.pk, agent_id=team["ledger"].pk, conversation_id=0)
    assert tool.handler(as_member, arguments).code == "MAKER_ONLY"


def test_the_maker_takes_out_a_removed_member_however_few_can_run(team, group, owner):
    from garden.services.agents import agent_remove

    agent_remove(agent=team["ledger"])
    agent_remove(agent=team["advisor"])
    result = platform_update_group(
        agent=team["father"],
        arguments={"group_id": group.pk, "members": ["concierge", "advisor"]},
    )
    assert "error" not in result, result
    assert result["group"]["members"] == ["concierge", "advisor"]


def test_the_maker_takes_members_out_without_the_runnable_rule(team, group):
    # Taking out brings nothing in: even the last runnable member besides the coordinator.
    result = platform_update_group(
        agent=team["father"], arguments={"group_id": group.pk, "members": ["concierge"]}
    )
    assert "error" not in result, result
    assert snapshot(group)[3] == [team["concierge"].pk]
