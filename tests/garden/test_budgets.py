"""Token budgets per owner on the operator's credentials: each call's tokens counted per owner,
credential, minute and day; past the day's budget a call is not made (TOKEN_BUDGET_SPENT), past
the minute's it waits for the next minute; an owner's own override from the admin's row; the
model account API shows what was spent. Against a real local server as the provider."""

from __future__ import annotations

import pytest

from garden.budgets import budget_check, budget_usage
from garden.models import Agent, Message, TokenBudget
from garden.services.accounts import model_account_create
from groups.loop.step import advance_request
from groups.payloads import request_payload
from groups.services.requests import request_create, request_start_next
from tests.garden.providers.httpserver import Respond, ScriptedServer
from tests.groups.conftest import make_group
from tests.groups.helpers import answer_of, answered_by, one_to_one
from tests.support.driving import drive
from tests.support.providers import openai_reply


@pytest.fixture(autouse=True)
def _ten_seconds_into_a_minute(clock):
    """The kit's clock (the budgets read it), ten seconds into a minute; the tests move it. The
    counters of that minute and day start empty, as every test's cache does."""
    clock.into_a_minute(10)


@pytest.fixture
def operator_api(loopback_providers):
    server = ScriptedServer()
    server.default = Respond(200, openai_reply("Answered.", usage=(60, 50)))
    yield server
    server.close()


@pytest.fixture
def shared(settings, monkeypatch, operator_api, owner):
    """An account of ``owner`` on the operator's credential ``shared`` (the local server)."""
    monkeypatch.setenv("GARDEN_TEST_OPERATOR_KEY", "sk-operator-secret")
    settings.GARDEN_CREDENTIALS = {
        "shared": {
            "provider": "openai",
            "env": "GARDEN_TEST_OPERATOR_KEY",
            "base_url": f"{operator_api.url}/v1",
            "users": "*",
        }
    }
    settings.GARDEN_TOKEN_BUDGET_PER_MINUTE = 0
    settings.GARDEN_TOKEN_BUDGET_PER_DAY = 0
    return model_account_create(
        owner=owner, name="on-shared", provider="openai", model="m", credential="shared"
    )


def coordinated_by(owner, account):
    group = make_group(owner, concierge_rules=[], members={})
    Agent.objects.filter(pk=group.coordinator_id).update(model_account=account)
    return group


def test_past_the_days_budget_a_group_request_ends_by_name_without_a_call(
    owner, shared, operator_api
):
    TokenBudget.objects.create(owner=owner, per_day=100)
    group = coordinated_by(owner, shared)
    first = request_create(group=group, text="One.")
    request_start_next(group_id=group.pk)
    drive(first, until_waiting=True)
    first.refresh_from_db()
    assert first.state == "completed" and (first.input_tokens, first.output_tokens) == (60, 50)

    second = request_create(group=group, text="Two.")
    request_start_next(group_id=group.pk)
    drive(second, until_waiting=True)
    second.refresh_from_db()
    assert (second.state, second.outcome_code) == ("failed", "TOKEN_BUDGET_SPENT")
    assert "110 of 100 tokens" in second.outcome and "'shared'" in second.outcome
    assert request_payload(second)["outcome_code"] == "TOKEN_BUDGET_SPENT"
    assert second.working_reserved == 0
    assert len(operator_api.requests) == 1
    notice = Message.objects.filter(request=second, kind="notice").last()
    assert "TOKEN_BUDGET_SPENT" in notice.text


def test_past_the_minutes_budget_a_step_waits_and_goes_on_in_the_next_minute(
    owner, shared, operator_api, clock
):
    TokenBudget.objects.create(owner=owner, per_minute=100)
    group = coordinated_by(owner, shared)
    first = request_create(group=group, text="One.")
    request_start_next(group_id=group.pk)
    drive(first, until_waiting=True)

    second = request_create(group=group, text="Two.")
    request_start_next(group_id=group.pk)
    assert drive(second, until_waiting=True) == ["waiting_for_token_budget"]
    second.refresh_from_db()
    assert second.state == "running" and second.waiting_for == "token_budget"
    assert request_payload(second)["waiting_for"] == "token_budget"
    assert second.working_reserved == 0 and len(operator_api.requests) == 1

    # The next minute: the step that comes back makes the call.
    clock.advance(50)
    second.refresh_from_db()
    advance_request(request_id=second.pk, fence=second.fence, group_id=group.pk)
    second.refresh_from_db()
    assert second.state == "completed" and second.waiting_for == ""
    assert len(operator_api.requests) == 2


def test_a_one_to_one_request_waits_for_the_minute_and_ends_for_the_day(
    owner, shared, operator_api, settings
):
    from garden.services.agents import agent_builtins_ensure

    agent_builtins_ensure(owner=owner)
    assert answered_by(owner, shared).text == "Answered."
    agent = Agent.objects.get(owner=owner, handle="concierge")

    settings.GARDEN_TOKEN_BUDGET_PER_MINUTE = 110
    waiting = one_to_one(owner, agent)
    drive(waiting, "running")
    assert advance_request(request_id=waiting.pk, fence=waiting.fence) == "waiting_for_token_budget"
    waiting.refresh_from_db()
    assert (waiting.state, waiting.waiting_for) == ("running", "token_budget")
    assert not Message.objects.filter(request=waiting, speaker_kind="agent").exists()

    settings.GARDEN_TOKEN_BUDGET_PER_DAY = 110
    drive(waiting, until_waiting=True)
    assert (waiting.state, waiting.outcome_code) == ("failed", "TOKEN_BUDGET_SPENT")
    notice = answer_of(waiting)
    assert (notice.speaker_kind, notice.kind) == ("garden", "notice")
    assert "midnight UTC" in notice.text
    assert len(operator_api.requests) == 1


def test_budgets_count_per_owner_and_never_an_owners_own_key(owner, stranger, shared, settings):
    from garden.budgets import budget_spend
    from garden.providers import Usage

    settings.GARDEN_TOKEN_BUDGET_PER_DAY = 1_000
    budget_spend(owner_id=owner.pk, account=shared, usage=Usage(900, 100))
    assert budget_check(owner_id=owner.pk, account=shared).code == "TOKEN_BUDGET_SPENT"
    # Another owner on the same credential has its own count.
    theirs = model_account_create(
        owner=stranger, name="theirs", provider="openai", model="m", credential="shared"
    )
    assert budget_check(owner_id=stranger.pk, account=theirs) is None
    # An owner's own key spends no operator credential.
    own = model_account_create(
        owner=owner,
        name="own",
        provider="openai",
        model="m",
        base_url="https://api.example.test/v1",
        api_key="sk-own",
    )
    assert budget_check(owner_id=owner.pk, account=own) is None
    assert budget_usage(owner_id=owner.pk, account=own) is None
    assert budget_usage(owner_id=owner.pk, account=shared) == {
        "credential": "shared",
        "per_minute": None,
        "per_day": 1_000,
        "used_this_minute": 1_000,
        "used_today": 1_000,
    }


def test_the_model_account_api_shows_what_was_spent(owner, shared, settings, api):
    from garden.budgets import budget_spend
    from garden.providers import Usage

    settings.GARDEN_TOKEN_BUDGET_PER_MINUTE = 5_000
    budget_spend(owner_id=owner.pk, account=shared, usage=Usage(30, 12))
    accounts = {a["name"]: a for a in api.get("/api/model-accounts").json()}
    assert accounts["on-shared"]["token_budget"] == {
        "credential": "shared",
        "per_minute": 5_000,
        "per_day": None,
        "used_this_minute": 42,
        "used_today": 42,
    }


def test_staff_set_an_owners_own_budget_in_the_admin(owner, shared, client, django_user_model):
    staff = django_user_model.objects.create_superuser(username="staff", password="pw-staff-123")
    client.force_login(staff)
    assert client.get("/admin/garden/tokenbudget/add/").status_code == 200
    response = client.post(
        "/admin/garden/tokenbudget/add/", {"owner": owner.pk, "per_minute": "", "per_day": "50"}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    row = TokenBudget.objects.get(owner=owner)
    assert (row.per_minute, row.per_day) == (None, 50)
    assert budget_usage(owner_id=owner.pk, account=shared)["per_day"] == 50
    refused = client.post(
        f"/admin/garden/tokenbudget/{row.pk}/change/",
        {"owner": owner.pk, "per_minute": "-1", "per_day": "50"},
    )
    assert refused.status_code == 200 and "per_minute" in refused.context["adminform"].form.errors
    assert TokenBudget.objects.get(owner=owner).per_minute is None


def test_a_rollover_counts_its_tokens_and_is_not_made_past_the_budget(
    owner, shared, operator_api, settings
):
    from garden.budgets import budget_used
    from groups.loop.rollover import request_after_finish

    group = coordinated_by(owner, shared)
    group.room_cap_chars = 3_000
    group.save(update_fields=["room_cap_chars"])
    operator_api.reply(200, openai_reply("Noted: " + "n" * 400, usage=(60, 50)))
    first = request_create(group=group, text="Plan the savings. " + "p" * 2_900)
    request_start_next(group_id=group.pk)
    drive(first, until_waiting=True)
    assert budget_used(owner_id=owner.pk, credential="shared")["day"] == 110

    settings.GARDEN_TOKEN_BUDGET_PER_DAY = 110
    assert request_after_finish(request_id=first.pk) == "token_budget_spent"
    notice = Message.objects.filter(request=first, kind="notice").last()
    assert "did not roll over" in notice.text and "TOKEN_BUDGET_SPENT" in notice.text
    assert len(operator_api.requests) == 1
    assert not Message.objects.filter(kind="summary").exists()

    settings.GARDEN_TOKEN_BUDGET_PER_DAY = 0
    operator_api.reply(200, openai_reply("SUMMARY: the plan.", usage=(500, 20)))
    assert request_after_finish(request_id=first.pk) == "rolled"
    assert budget_used(owner_id=owner.pk, credential="shared")["day"] == 630


def test_a_call_stopped_mid_stream_is_charged_an_estimate(owner, shared, operator_api):
    """The usage comes at a stream's end, which a stopped call never reads; it was billed all
    the same, so the owner's budget on the credential is charged what it sent and streamed."""
    from groups.services.stopped_turns import stop_announce
    from tests.groups.helpers import openai_stream

    events = openai_stream(openai_reply("Word " * 40, usage=(60, 50)), pieces=8)
    operator_api.stream(*events, interval=0.3)
    group = coordinated_by(owner, shared)
    request = request_create(group=group, text="Tell me a long story.")
    request_start_next(group_id=group.pk)
    request.refresh_from_db()
    # Stopped before the step runs: its draft hears of it half a second into the stream.
    stop_announce(request.pk)
    outcome = advance_request(request_id=request.pk, fence=request.fence, group_id=group.pk)
    assert outcome == "stopped"
    assert operator_api.sent < len(events)
    used = budget_usage(owner_id=owner.pk, account=shared)["used_today"]
    assert used > 0, used
    request.refresh_from_db()
    assert (request.input_tokens, request.output_tokens) == (0, 0)  # nothing reported
