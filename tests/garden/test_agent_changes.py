"""PATCH and DELETE /api/agents/:id: what an owner may change on an agent, and what removing
one does, with named refusals that write nothing."""

import pytest

from garden.models import Agent, ModelAccount
from groups.models import Group, Membership

pytestmark = pytest.mark.django_db


def agent(owner, handle):
    return Agent.objects.get(owner=owner, handle=handle)


def snapshot(row):
    row.refresh_from_db()
    return (
        row.name,
        row.colour,
        row.instructions,
        row.model_account_id,
        row.enabled_tools,
        row.approval_tools,
        sorted(row.delegation_allowlist.values_list("handle", flat=True)),
        row.removed_at,
    )


def errors_of(response):
    return {(e["field"], e["code"]) for e in response.json()["errors"]}


@pytest.fixture
def ledger(api, owner):
    response = api.post("/api/agents", {"handle": "ledger", "name": "Ledger"})
    assert response.status_code == 201, response.content
    return agent(owner, "ledger")


@pytest.fixture
def real_account(owner):
    return ModelAccount.objects.create(
        owner=owner, name="Local", provider="openai", model="m", base_url="http://127.0.0.1:9/v1"
    )


def test_patch_changes_every_editable_part(api, owner, ledger, real_account):
    response = api.patch(
        f"/api/agents/{ledger.pk}",
        {
            "name": "The Ledger",
            "colour": "#123456",
            "instructions": "Keep the books.",
            "model_account": real_account.pk,
            "enabled_tools": ["file.write", "memory.recall"],
            "approval_tools": ["file.write"],
            "delegation_allowlist": ["concierge"],
        },
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["handle"] == "ledger"
    assert body["model_account"] == real_account.pk
    assert body["delegation_allowlist"] == ["concierge"]
    assert snapshot(ledger) == (
        "The Ledger",
        "#123456",
        "Keep the books.",
        real_account.pk,
        ["file.write", "memory.recall"],
        ["file.write"],
        ["concierge"],
        None,
    )
    assert api.get(f"/api/agents/{ledger.pk}").json()["name"] == "The Ledger"


def test_the_concierge_can_move_to_a_real_model(api, owner, real_account):
    concierge = agent(owner, "concierge")
    response = api.patch(
        f"/api/agents/{concierge.pk}",
        {"model_account": real_account.pk, "instructions": "Coordinate kindly."},
    )
    assert response.status_code == 200, response.content
    concierge.refresh_from_db()
    assert concierge.model_account_id == real_account.pk
    assert concierge.instructions == "Coordinate kindly."


def test_removing_a_tool_takes_its_approval_rule_with_it(api, ledger):
    api.patch(
        f"/api/agents/{ledger.pk}",
        {"enabled_tools": ["file.write"], "approval_tools": ["file.write"]},
    )
    response = api.patch(f"/api/agents/{ledger.pk}", {"enabled_tools": []})
    assert response.status_code == 200, response.content
    ledger.refresh_from_db()
    assert (ledger.enabled_tools, ledger.approval_tools) == ([], [])


@pytest.mark.parametrize(
    ("payload", "field", "code"),
    [
        ({"handle": "other"}, "handle", "HANDLE_FIXED"),
        ({"colour": "blue"}, "colour", "invalid"),
        ({"name": ""}, "name", "blank"),
        ({"instructions": "x" * 20_001}, "instructions", "max_length"),
        ({"model_account": 999_999}, "model_account", "MODEL_ACCOUNT_NOT_FOUND"),
        ({"enabled_tools": ["shell.run"]}, "enabled_tools", "UNKNOWN_TOOL"),
        ({"enabled_tools": ["group.ask"]}, "enabled_tools", "TOOL_NOT_ALLOWED"),
        ({"enabled_tools": ["platform.archive_group"]}, "enabled_tools", "TOOL_NOT_ALLOWED"),
        ({"approval_tools": ["file.write"]}, "approval_tools", "TOOL_NOT_ENABLED"),
        ({"delegation_allowlist": ["ghost"]}, "delegation_allowlist", "UNKNOWN_AGENT"),
        ({"delegation_allowlist": ["ledger"]}, "delegation_allowlist", "SELF_DELEGATION"),
        ({"enabled_tools": "file.write"}, "enabled_tools", "not_a_list"),
    ],
)
def test_bad_changes_are_named_and_write_nothing(api, ledger, payload, field, code):
    before = snapshot(ledger)
    response = api.patch(f"/api/agents/{ledger.pk}", payload)
    assert response.status_code == 400, response.content
    assert (field, code) in errors_of(response), response.json()
    assert snapshot(ledger) == before


def test_another_owners_agent_and_account_are_404s(api, owner, stranger, ledger):
    theirs = agent(stranger, "concierge")
    their_account = ModelAccount.objects.create(owner=stranger, name="Theirs", provider="scripted")
    before = snapshot(theirs)
    assert api.get(f"/api/agents/{theirs.pk}").status_code == 404
    assert api.patch(f"/api/agents/{theirs.pk}", {"name": "Mine"}).status_code == 404
    assert api.delete(f"/api/agents/{theirs.pk}").status_code == 404
    assert snapshot(theirs) == before
    response = api.patch(f"/api/agents/{ledger.pk}", {"model_account": their_account.pk})
    assert ("model_account", "MODEL_ACCOUNT_NOT_FOUND") in errors_of(response)
    response = api.patch(f"/api/agents/{ledger.pk}", {"delegation_allowlist": ["concierge"]})
    assert response.status_code == 200
    # The handle named the owner's own Concierge, never the stranger's.
    assert list(ledger.delegation_allowlist.all()) == [agent(owner, "concierge")]


def test_delete_removes_an_agent_and_it_leaves_the_list(api, owner, ledger):
    response = api.delete(f"/api/agents/{ledger.pk}")
    assert response.status_code == 204, response.content
    ledger.refresh_from_db()
    assert ledger.removed_at is not None and not ledger.can_run
    assert "ledger" not in {a["handle"] for a in api.get("/api/agents").json()}
    assert api.get(f"/api/agents/{ledger.pk}").status_code == 404
    # Its handle stays its own: a new agent cannot take it over in old transcripts.
    again = api.post("/api/agents", {"handle": "ledger", "name": "Ledger 2"})
    assert ("handle", "HANDLE_TAKEN") in errors_of(again)


def test_builtins_are_not_removed(api, owner):
    for handle in ("concierge", "father"):
        row = agent(owner, handle)
        response = api.delete(f"/api/agents/{row.pk}")
        assert response.status_code == 409
        assert response.json()["code"] == "BUILTIN_AGENT"
        row.refresh_from_db()
        assert row.removed_at is None


def test_a_coordinator_is_not_removed_until_replaced(api, owner, ledger):
    advisor = Agent.objects.create(
        owner=owner, handle="advisor", name="Advisor", model_account=ledger.model_account
    )
    group = Group.objects.create(owner=owner, name="Books", coordinator=ledger)
    for position, member in enumerate((ledger, advisor, agent(owner, "concierge"))):
        Membership.objects.create(group=group, agent=member, position=position)
    response = api.delete(f"/api/agents/{ledger.pk}")
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "AGENT_COORDINATES" and "Books" in body["message"]
    ledger.refresh_from_db()
    assert ledger.removed_at is None
    changed = api.patch(f"/api/groups/{group.pk}", {"coordinator": advisor.pk})
    assert changed.status_code == 200, changed.content
    assert api.delete(f"/api/agents/{ledger.pk}").status_code == 204
