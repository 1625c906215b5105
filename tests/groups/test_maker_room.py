"""Agent Father acts from its room: its model (a real local OpenAI-compatible server) calls the
platform tools, each change waits for the owner's approval, and the tool result the model
receives carries the change — or the same named refusal as the API for a bad one. It cannot
reach another owner's groups."""

from __future__ import annotations

import json

import pytest

from garden.models import Agent, Conversation
from garden.services.accounts import scripted_account_for
from garden.services.agents import agent_create
from groups.models import Approval, Group
from groups.services.approvals import approval_decide, approval_execute
from groups.services.groups import group_create
from groups.services.requests import conversation_request_create
from tests.groups.helpers import on_server
from tests.support.driving import drive
from tests.support.providers import openai_reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(owner):
    account = scripted_account_for(owner=owner)
    return {
        "father": Agent.objects.get(owner=owner, builtin="maker"),
        "ledger": agent_create(owner=owner, handle="ledger", name="Ledger", model_account=account),
        "advisor": agent_create(
            owner=owner, handle="advisor", name="Advisor", model_account=account
        ),
    }


def household(owner, team, name="Household"):
    return group_create(owner=owner, name=name, members=[team["ledger"].pk, team["advisor"].pk])


def snapshot(group):
    group = Group.objects.get(pk=group.pk)
    members = group.memberships.order_by("position").values_list("agent_id", flat=True)
    return group.name, group.coordinator_id, group.archived_at, list(members)


def ask_father(owner, father, server, text, *replies):
    """``text`` to Agent Father, whose model answers ``replies`` in turn: its request, run to
    the approval its first tool call waits for (or to its end)."""
    on_server(owner, father, server)
    for reply in replies:
        server.reply(200, reply)
    conversation = Conversation.objects.create(owner=owner, agent=father)
    request = conversation_request_create(owner=owner, conversation=conversation, text=text)
    drive(request, "awaiting_approval", "completed", "failed", "stopped")
    return request


def approve(owner, request):
    """Approve the request's pending action, as a person would, and run the request on to its
    end or its next approval."""
    approval = Approval.objects.get(request=request, status="pending")
    approval_decide(user=owner, approval_id=approval.pk, decision="approve")
    assert approval_execute(approval_id=approval.pk) == "executed"
    drive(request, "awaiting_approval", "completed", "failed", "stopped")
    return approval


def tool_result_sent(server) -> dict:
    """What the model was sent back as its tool call's result, on the call after it."""
    message = [m for m in server.requests[-1].body["messages"] if m["role"] == "tool"][-1]
    # The adapter marks a result that is an error so.
    return json.loads(message["content"].removeprefix("Error: "))


def test_the_maker_renames_a_group_after_approval(owner, team, provider_server):
    group = household(owner, team)
    call = ("c1", "platform.update_group", {"group_id": group.pk, "name": "Home budget"})
    request = ask_father(
        owner,
        team["father"],
        provider_server,
        "Rename the household group to Home budget.",
        openai_reply("Renaming it.", [call]),
        openai_reply("Done: it is called Home budget now."),
    )
    assert request.state == "awaiting_approval"
    # Its platform tools are offered in its room, and nothing changed before the approval.
    offered = [t["function"]["name"] for t in provider_server.requests[0].body["tools"]]
    assert {"platform__update_group", "platform__archive_group"} <= set(offered)
    assert "group__ask" not in offered
    assert Group.objects.get(pk=group.pk).name == "Household"
    approval = approve(owner, request)
    assert approval.action == {"name": call[1], "arguments": call[2]}
    assert request.state == "completed"
    assert Group.objects.get(pk=group.pk).name == "Home budget"
    assert tool_result_sent(provider_server)["group"]["name"] == "Home budget"


def test_the_maker_archives_another_group_after_approval(owner, team, provider_server):
    household(owner, team)
    other = household(owner, team, name="Trips")
    request = ask_father(
        owner,
        team["father"],
        provider_server,
        "Archive Trips.",
        openai_reply(None, [("c1", "platform.archive_group", {"group_id": other.pk})]),
        openai_reply("Archived."),
    )
    approve(owner, request)
    assert Group.objects.get(pk=other.pk).archived_at is not None
    assert tool_result_sent(provider_server)["group"]["archived"] is True


def test_a_bad_change_gets_the_apis_refusal_as_its_result(api, owner, team, provider_server):
    group = household(owner, team)
    before = snapshot(group)
    refused = api.patch(f"/api/groups/{group.pk}", {"members": [team["ledger"].pk]})
    assert refused.status_code == 400
    code = refused.json()["errors"][0]["code"]
    request = ask_father(
        owner,
        team["father"],
        provider_server,
        "Leave only Ledger in the household.",
        openai_reply(
            None, [("c1", "platform.update_group", {"group_id": group.pk, "members": ["ledger"]})]
        ),
        openai_reply("That is not allowed."),
    )
    approve(owner, request)
    result = tool_result_sent(provider_server)
    assert result["error"]["code"] == code
    assert snapshot(group) == before


def test_the_maker_cannot_reach_another_owners_group(owner, stranger, team, provider_server):
    account = scripted_account_for(owner=stranger)
    theirs = group_create(
        owner=stranger,
        name="Theirs",
        members=[
            agent_create(owner=stranger, handle=h, name=h, model_account=account).pk
            for h in ("a1", "a2")
        ],
    )
    request = ask_father(
        owner,
        team["father"],
        provider_server,
        "Rename group Theirs.",
        openai_reply(
            None, [("c1", "platform.update_group", {"group_id": theirs.pk, "name": "Mine"})]
        ),
        openai_reply("No such group."),
    )
    approve(owner, request)
    assert tool_result_sent(provider_server)["error"]["code"] == "GROUP_NOT_FOUND"
    assert Group.objects.get(pk=theirs.pk).name == "Theirs"


def test_the_maker_creates_an_agent_and_a_group_from_a_description(owner, team, provider_server):
    request = ask_father(
        owner,
        team["father"],
        provider_server,
        "Make me a travel agent.",
        openai_reply(
            None,
            [
                (
                    "c1",
                    "platform.create_agent",
                    {"handle": "travel", "name": "Travel", "instructions": "You plan trips."},
                )
            ],
        ),
        openai_reply(
            None,
            [("c2", "platform.create_group", {"name": "Trips", "members": ["travel", "ledger"]})],
        ),
        openai_reply("Made Travel and the Trips group."),
    )
    approve(owner, request)  # the agent; then the group waits for its own approval
    assert request.state == "awaiting_approval"
    made = Agent.objects.get(owner=owner, handle="travel")
    assert (made.name, made.instructions) == ("Travel", "You plan trips.")
    approve(owner, request)
    assert request.state == "completed"
    group = Group.objects.get(owner=owner, name="Trips")
    # Concierge coordinates, as it does for a group made from the API without a coordinator.
    assert [m.agent.handle for m in group.memberships.order_by("position")] == [
        "concierge",
        "travel",
        "ledger",
    ]
    assert tool_result_sent(provider_server)["group"]["name"] == "Trips"


def test_the_owner_may_turn_a_makers_approval_off(owner, team, provider_server):
    group = household(owner, team)
    father = team["father"]
    father.approval_tools = [t for t in father.approval_tools if t != "platform.update_group"]
    father.save(update_fields=["approval_tools"])
    request = ask_father(
        owner,
        father,
        provider_server,
        "Rename it.",
        openai_reply(
            None, [("c1", "platform.update_group", {"group_id": group.pk, "name": "Home"})]
        ),
        openai_reply("Renamed."),
    )
    assert request.state == "completed" and not Approval.objects.exists()
    assert Group.objects.get(pk=group.pk).name == "Home"


@pytest.mark.parametrize(
    ("arguments", "code", "field"),
    [
        ({"handle": "ledger", "name": "Again"}, "HANDLE_TAKEN", "handle"),
        (
            {"handle": "new", "name": "New", "model_account": 999_999},
            "MODEL_ACCOUNT_NOT_FOUND",
            "model_account",
        ),
        (
            {"handle": "new", "name": "New", "enabled_tools": ["platform.archive_group"]},
            "TOOL_NOT_ALLOWED",
            "enabled_tools",
        ),
        ({"handle": "bad handle!", "name": "New"}, "INVALID_ARGUMENTS", None),
    ],
)
def test_create_agent_refusals_are_named_and_write_nothing(team, arguments, code, field):
    from groups.platform_tools import platform_create_agent

    before = Agent.objects.count()
    result = platform_create_agent(agent=team["father"], arguments=arguments)
    assert result["error"]["code"] == code, result
    if field:
        assert result["error"]["field"] == field
    assert Agent.objects.count() == before


def test_create_agent_counts_against_the_owners_agent_limit(team, settings):
    from groups.platform_tools import platform_create_agent

    settings.GARDEN_MAX_AGENTS_PER_OWNER = Agent.objects.filter(owner=team["father"].owner).count()
    result = platform_create_agent(agent=team["father"], arguments={"handle": "x", "name": "X"})
    assert result["error"]["code"] == "AGENT_LIMIT", result
    assert not Agent.objects.filter(handle="x").exists()


def test_only_the_maker_creates(team):
    from groups.platform_tools import platform_create_agent, platform_create_group

    for tool, arguments in (
        (platform_create_agent, {"handle": "x", "name": "X"}),
        (platform_create_group, {"name": "G", "members": ["ledger", "advisor"]}),
    ):
        assert tool(agent=team["ledger"], arguments=arguments)["error"]["code"] == "MAKER_ONLY"


# --- offline: Agent Father's own script ---------------------------------------------------------


def ask_offline_father(owner, text):
    """``text`` to Agent Father on the offline script every owner's maker starts on."""
    father = Agent.objects.get(owner=owner, builtin="maker")
    conversation = Conversation.objects.create(owner=owner, agent=father)
    request = conversation_request_create(owner=owner, conversation=conversation, text=text)
    drive(request, "awaiting_approval", "completed", "failed", "stopped")
    return request


def father_said(request) -> str:
    """Agent Father's last words in ``request``."""
    turns = request.conversation.messages.filter(
        request=request, speaker_agent__builtin="maker", kind="turn"
    ).order_by("seq")
    return [m.text for m in turns if m.text][-1]


def test_offline_father_makes_the_agent_it_is_asked_for_after_approval(owner):
    father = Agent.objects.get(owner=owner, builtin="maker")
    assert father.model_account != scripted_account_for(owner=owner)  # no one else speaks it
    request = ask_offline_father(owner, "Make me an agent called Tax Helper")
    assert request.state == "awaiting_approval"
    assert not Agent.objects.filter(owner=owner, handle="tax-helper").exists()
    approval = approve(owner, request)
    assert approval.action["name"] == "platform.create_agent"
    assert approval.action["arguments"]["name"] == "Tax Helper"
    made = Agent.objects.get(owner=owner, handle="tax-helper")
    assert made.name == "Tax Helper" and made.model_account == scripted_account_for(owner=owner)
    assert request.state == "completed"
    assert father_said(request).startswith("Done: I made the agent Tax Helper (@tax-helper).")


def test_offline_father_says_a_refused_or_failed_change_did_not_happen(owner):
    approve(owner, ask_offline_father(owner, "create an agent named Tax Helper"))
    # The handle is taken now: the tool's refusal is what Agent Father says.
    again = ask_offline_father(owner, "create an agent named Tax Helper")
    approve(owner, again)
    assert father_said(again) == (
        "Nothing was changed — it did not go through: HANDLE_TAKEN: @tax-helper is taken."
    )
    rejected = ask_offline_father(owner, "make me an agent called Payroll")
    approval = Approval.objects.get(request=rejected, status="pending")
    approval_decide(user=owner, approval_id=approval.pk, decision="reject")
    drive(rejected)
    assert father_said(rejected).startswith("Nothing was changed — it did not go through: REJECTED")
    assert not Agent.objects.filter(owner=owner, handle="payroll").exists()


def test_offline_father_lists_what_it_understands_for_anything_else(owner):
    request = ask_offline_father(owner, "Rename the household group to Home budget.")
    assert request.state == "completed"
    said = father_said(request)
    assert "make me an agent called <name>" in said and "create an agent named <name>" in said
    assert not Approval.objects.filter(request=request).exists()
