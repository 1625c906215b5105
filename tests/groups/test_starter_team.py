"""The starter team has one definition (groups.demo.HOUSEHOLD_FINANCES): the dashboard's
**Create the Household finances team** and ``make demo`` make the same agents, every tool
their scripts call is theirs, and Ledger's first note lands in the group's memory — or, when
its tool fails, Ledger says that it failed."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from garden.models import Agent, MemoryNote, Message
from garden.services.agents import agent_update
from garden.services.maker_script import MAKER_SCRIPT
from garden.tools import all_tools
from groups.demo import HOUSEHOLD_FINANCES, household_finances, maker_script
from groups.models import Group
from groups.services.requests import request_create
from tests.support.driving import drive

pytestmark = pytest.mark.django_db

REMEMBER = "@ledger please remember that our rent is 1,400 a month."


@pytest.fixture(autouse=True)
def _unpaced(settings):
    settings.GARDEN_STARTER_PACE_SECONDS = 0


def team_of(group: Group) -> dict:
    """What a team is, as its rows hold it: the group, and each agent in the room's order."""
    agents = []
    for m in group.memberships.select_related("agent__model_account").order_by("position"):
        a = m.agent
        script = {k: v for k, v in a.model_account.options.items() if k != "delay"}
        agents.append((a.handle, a.name, a.instructions, a.enabled_tools, a.approval_tools, script))
    return {"name": group.name, "coordinator": group.coordinator.handle, "agents": agents}


def defined(owner) -> dict:
    concierge = Agent.objects.get(owner=owner, builtin="concierge")
    return {
        "name": HOUSEHOLD_FINANCES.name,
        "coordinator": "concierge",
        "agents": [
            (
                "concierge",
                concierge.name,
                concierge.instructions,
                concierge.enabled_tools,
                concierge.approval_tools,
                HOUSEHOLD_FINANCES.coordinator_script,
            ),
            *(
                (
                    s.handle,
                    s.name,
                    s.instructions,
                    list(s.enabled_tools),
                    list(s.approval_tools),
                    s.script,
                )
                for s in HOUSEHOLD_FINANCES.members
            ),
        ],
    }


def test_the_dashboards_button_and_the_demo_make_the_one_defined_team(api, owner):
    made = api.post("/api/groups/starter")
    assert made.status_code == 201
    from_button = team_of(Group.objects.get(pk=made.json()["id"]))
    # What `manage.py demo` makes its team with.
    demo_owner = get_user_model().objects.create_user(username="demo")
    from_demo = team_of(household_finances(demo_owner))
    assert from_button == from_demo == defined(owner)
    assert ("ledger", "Ledger") == from_button["agents"][1][:2]
    assert from_button["agents"][1][3] == ["memory.remember"]


def _calls(script: dict) -> set[str]:
    return {
        call["name"]
        for rule in script["rules"]
        if isinstance(rule.get("reply"), dict)
        for call in rule["reply"].get("tool_calls", [])
    }


def test_every_tool_a_starter_script_calls_is_enabled_for_its_agent():
    for spec in HOUSEHOLD_FINANCES.members:
        assert _calls(spec.script) <= set(spec.enabled_tools), spec.handle
    # The coordinator's calls are its role's (group.ask), given by the loop, not by hand.
    assert all(
        all_tools()[name].loop_handled for name in _calls(HOUSEHOLD_FINANCES.coordinator_script)
    )
    # Agent Father's scripts call only its platform tools.
    father = MAKER_SCRIPT, maker_script(group_id=1, name="X")
    assert all(_calls(s) <= {"platform.create_agent", "platform.update_group"} for s in father)


def test_an_earlier_runs_ledger_gets_the_tool_its_script_calls(owner):
    household_finances(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    agent_update(agent=ledger, enabled_tools=[])
    household_finances(owner)
    ledger.refresh_from_db()
    assert ledger.enabled_tools == ["memory.remember"]


def ledger_turns(request) -> list[dict]:
    return [
        b
        for m in Message.objects.filter(request=request, speaker_agent__handle="ledger").order_by(
            "seq"
        )
        for b in m.content
    ]


def test_ledgers_first_note_from_the_starter_team_lands_in_the_groups_memory(api, owner):
    group = Group.objects.get(pk=api.post("/api/groups/starter").json()["id"])
    request = request_create(group=group, text=REMEMBER)
    drive(request)
    assert request.state == "completed"
    note = MemoryNote.objects.get(owner=owner)
    assert (note.scope, note.text) == (f"group:{group.pk}", "Rent is 1,400 a month.")
    assert note.written_by.handle == "ledger"
    blocks = ledger_turns(request)
    results = [b for b in blocks if b["type"] == "tool_result"]
    assert [r["is_error"] for r in results] == [False]
    assert "Remembered in the group's memory" in results[0]["content"]
    assert blocks[-1]["text"] == "Noted: rent is 1,400 a month. I'll use it from now on."


def test_a_note_that_fails_is_said_to_have_failed(api, owner):
    group = Group.objects.get(pk=api.post("/api/groups/starter").json()["id"])
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    agent_update(agent=ledger, enabled_tools=[])  # the team as it was made before the fix
    request = request_create(group=group, text=REMEMBER)
    drive(request)
    assert not MemoryNote.objects.filter(owner=owner).exists()
    texts = [b["text"] for b in ledger_turns(request) if b["type"] == "text"]
    assert texts[-1] == (
        "I couldn't note that: TOOL_NOT_AVAILABLE: @ledger has no tool 'memory.remember' here."
    )
    assert not any(t.startswith("Noted") for t in texts)
