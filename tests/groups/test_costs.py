"""What a request's calls cost: each call's tokens at the price table's prices (or the
operator's override), recorded on its reservation in the statement that consumes it, summed on
the request and per member; a model with no price is counted as unpriced, never as free. Run on
PostgreSQL (the one-statement path) and on SQLite (its ORM twin)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from genai_prices import Usage, calc_price
from rest_framework.test import APIClient

from garden.models import Agent
from garden.pricing import PricedCall
from garden.services.accounts import model_account_create
from groups import budget, lock_order
from groups.loop.fencing import StaleStep, fenced
from groups.loop.rollover import request_after_finish
from groups.loop.room import load_room
from groups.models import CallReservation, GroupRequest
from groups.payloads import request_payload
from groups.services.requests import request_create, request_start_next
from tests.support.driving import drive
from tests.support.providers import openai_reply

ASK_LEDGER = ("call-1", "group.ask", {"member": "ledger", "request": "Sum the rent."})
ASK_SCOUT = ("call-2", "group.ask", {"member": "scout", "request": "Find the lease."})


def on_model(owner, agent: Agent, server, model: str) -> None:
    """Point ``agent`` at ``server`` (an OpenAI-compatible server that is not OpenAI's: the
    table is searched by the model's name alone) as ``model``."""
    agent.model_account = model_account_create(
        owner=owner,
        name=f"{agent.handle}-{model}",
        provider="openai",
        model=model,
        base_url=f"{server.url}/v1",
        timeout_seconds=5,
    )
    agent.save(update_fields=["model_account"])


def table(model: str, tokens: tuple[int, int]) -> Decimal:
    """The table's price of ``tokens`` (input, output) on ``model``, asked of genai-prices."""
    return calc_price(
        Usage(input_tokens=tokens[0], output_tokens=tokens[1]), model_ref=model
    ).total_price


def member(answer: dict, handle: str) -> dict:
    return next(m for m in answer["members"] if m["agent"]["handle"] == handle)


def test_a_requests_cost_is_its_calls_tokens_at_the_tables_prices_per_member(
    group_factory, owner, provider_server, api
):
    group = group_factory(
        concierge_rules=[], members={"ledger": [], "scout": [{"reply": "The lease is here."}]}
    )
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    on_model(owner, group.coordinator, provider_server, "gpt-4o")
    on_model(owner, ledger, provider_server, "gpt-4o-mini")
    asked, answered, concluded = (120, 15), (300, 40), (180, 40)
    provider_server.reply(200, openai_reply("Asking.", [ASK_LEDGER, ASK_SCOUT], usage=asked))
    provider_server.reply(200, openai_reply("1,400 a month.", usage=answered))
    provider_server.reply(200, openai_reply("The rent is 1,400.", usage=concluded))
    request = request_create(group=group, text="What is the rent?")

    drive(request)

    assert request.state == "completed", request.outcome
    concierge_cost = table("gpt-4o", asked) + table("gpt-4o", concluded)
    ledger_cost = table("gpt-4o-mini", answered)
    assert concierge_cost > 0 and ledger_cost > 0
    # Each reservation records what its call was and what it took.
    calls = list(
        CallReservation.objects.filter(request=request).values_list(
            "agent__handle", "provider", "model", "input_tokens", "output_tokens", "cost"
        )
    )
    assert calls == [
        ("concierge", "openai", "gpt-4o", *asked, table("gpt-4o", asked)),
        ("ledger", "openai", "gpt-4o-mini", *answered, ledger_cost),
        ("scout", "scripted", "scripted", 0, 0, Decimal(0)),  # offline: it costs nothing
        ("concierge", "openai", "gpt-4o", *concluded, table("gpt-4o", concluded)),
    ]
    # The request's cost is the sum of its calls', in the payload the room is pushed.
    assert request.cost == concierge_cost + ledger_cost
    assert request.unpriced_calls == 0
    usage = request_payload(request)["usage"]
    assert Decimal(usage["cost"]) == concierge_cost + ledger_cost
    assert usage["unpriced_calls"] == 0

    answer = api.get(f"/api/groups/{group.pk}/requests/{request.pk}/costs").json()
    assert answer["request"] == request.pk and answer["usage"] == usage
    assert [m["agent"]["handle"] for m in answer["members"]] == ["concierge", "ledger", "scout"]
    concierge = member(answer, "concierge")
    assert (concierge["calls"], concierge["input_tokens"], concierge["output_tokens"]) == (
        2,
        asked[0] + concluded[0],
        asked[1] + concluded[1],
    )
    assert Decimal(concierge["cost"]) == concierge_cost
    assert Decimal(member(answer, "ledger")["cost"]) == ledger_cost
    scout = member(answer, "scout")
    assert (scout["calls"], Decimal(scout["cost"]), scout["unpriced_calls"]) == (1, 0, 0)
    assert sum(Decimal(m["cost"]) for m in answer["members"]) == request.cost


def test_an_override_wins_and_a_model_without_a_price_is_unpriced(
    group_factory, owner, provider_server, api, settings
):
    settings.GARDEN_MODEL_PRICES = {"GPT-4o": {"input_per_mtok": "1", "output_per_mtok": "4.5"}}
    group = group_factory(concierge_rules=[], members={"ledger": []})
    on_model(owner, group.coordinator, provider_server, "gpt-4o")
    on_model(owner, Agent.objects.get(owner=owner, handle="ledger"), provider_server, "llama3.1:8b")
    provider_server.reply(200, openai_reply("Asking.", [ASK_LEDGER], usage=(1000, 100)))
    provider_server.reply(200, openai_reply("1,400 a month.", usage=(2000, 300)))
    provider_server.reply(200, openai_reply("The rent is 1,400.", usage=(3000, 200)))
    request = request_create(group=group, text="What is the rent?")

    drive(request)

    assert request.state == "completed", request.outcome
    # The operator's price, not the table's: (1000 + 3000) x $1 + (100 + 200) x $4.5, per M.
    overridden = Decimal("0.0053500")
    assert overridden != table("gpt-4o", (1000, 100)) + table("gpt-4o", (3000, 200))
    assert (request.cost, request.unpriced_calls) == (overridden, 1)
    assert (request.input_tokens, request.output_tokens) == (6000, 600)
    unpriced = CallReservation.objects.get(request=request, agent__handle="ledger")
    assert (unpriced.model, unpriced.input_tokens, unpriced.cost) == ("llama3.1:8b", 2000, None)

    answer = api.get(f"/api/groups/{group.pk}/requests/{request.pk}/costs").json()
    ledger = member(answer, "ledger")
    assert (ledger["calls"], ledger["unpriced_calls"], Decimal(ledger["cost"])) == (1, 1, 0)
    assert (ledger["input_tokens"], ledger["output_tokens"]) == (2000, 300)
    assert Decimal(member(answer, "concierge")["cost"]) == overridden
    assert answer["usage"]["unpriced_calls"] == 1


def test_a_call_is_recorded_and_counted_in_the_statement_that_consumes_it(group_factory):
    """The fast path and its ORM twin (whichever this database runs) leave the same rows; on
    PostgreSQL it is one statement, lock and count together."""
    group = group_factory(concierge_rules=[], members={})
    request = request_create(group=group, text="hello")
    request_start_next(group_id=group.pk)
    reserve = {"request_id": request.pk, "agent_id": group.coordinator_id, "fence": None}
    priced = budget.reserve_call(purpose=CallReservation.Purpose.WORKING, **reserve)
    unpriced = budget.reserve_call(purpose=CallReservation.Purpose.WORKING, **reserve)

    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        first = lock_order.lock_request_values(
            request.pk,
            "input_tokens",
            "cost",
            "unpriced_calls",
            consume=priced.pk,
            call=PricedCall("openai", "gpt-4o", 1_000, 100, Decimal("0.003500000")),
        )
    with transaction.atomic():
        second = lock_order.lock_request_values(
            request.pk,
            "input_tokens",
            "cost",
            "unpriced_calls",
            consume=unpriced.pk,
            call=PricedCall("openai", "llama3.1:8b", 50, 5, None),
        )

    assert len(queries.captured_queries) == (1 if connection.vendor == "postgresql" else 3)
    assert first == (1_000, Decimal("0.0035"), 0)
    assert second == (1_050, Decimal("0.0035"), 1)
    rows = CallReservation.objects.filter(request=request).order_by("id")
    assert list(rows.values_list("status", "model", "input_tokens", "output_tokens", "cost")) == [
        ("consumed", "gpt-4o", 1_000, 100, Decimal("0.0035")),
        ("consumed", "llama3.1:8b", 50, 5, None),
    ]
    request.refresh_from_db()
    assert (request.output_tokens, request.cost, request.unpriced_calls) == (
        105,
        Decimal("0.0035"),
        1,
    )


def test_a_stale_step_records_no_cost(group_factory, owner, provider_server):
    """A reply recorded by a step whose fence moved is rolled back with its cost."""
    group = group_factory(concierge_rules=[], members={})
    request = request_create(group=group, text="hello")
    request_start_next(group_id=group.pk)
    request.refresh_from_db()
    room = load_room(request.pk, request.fence)
    reservation = budget.reserve_call(
        request_id=request.pk,
        purpose=CallReservation.Purpose.WORKING,
        agent_id=group.coordinator_id,
        fence=None,
    )
    GroupRequest.objects.filter(pk=request.pk).update(fence=request.fence + 5)
    call = PricedCall("openai", "gpt-4o", 100, 10, Decimal("0.000350"))

    with pytest.raises(StaleStep):
        with fenced(room, consume=reservation, call=call):
            pass

    request.refresh_from_db()
    reservation.refresh_from_db()
    assert (request.cost, request.input_tokens, request.unpriced_calls) == (0, 0, 0)
    assert (reservation.status, reservation.cost, reservation.model) == ("reserved", None, "")


def test_the_rollover_summary_call_is_recorded_and_counted_on_its_request(
    group_factory, owner, provider_server
):
    group = group_factory(concierge_rules=[], members={})
    group.room_cap_chars = 3_000
    group.save(update_fields=["room_cap_chars"])
    on_model(owner, group.coordinator, provider_server, "gpt-4o")
    provider_server.reply(200, openai_reply("Noted: " + "n" * 400, usage=(900, 20)))
    provider_server.reply(200, openai_reply("SUMMARY: the plan.", usage=(1500, 60)))
    request = request_create(group=group, text="Plan the savings. " + "p" * 2_900)
    drive(request)
    assert request.state == "completed", request.outcome

    assert request_after_finish(request_id=request.pk) == "rolled"

    request.refresh_from_db()
    maintenance = CallReservation.objects.get(request=request, purpose="maintenance")
    assert (maintenance.status, maintenance.provider, maintenance.model) == (
        "consumed",
        "openai",
        "gpt-4o",
    )
    assert (maintenance.input_tokens, maintenance.output_tokens) == (1500, 60)
    assert maintenance.cost == table("gpt-4o", (1500, 60))
    assert request.cost == table("gpt-4o", (900, 20)) + table("gpt-4o", (1500, 60))
    assert (request.input_tokens, request.output_tokens) == (2400, 80)


def test_another_owners_request_costs_are_404(group_factory, owner, stranger):
    group = group_factory(concierge_rules=[], members={})
    request = request_create(group=group, text="hello")
    drive(request)
    client = APIClient()
    client.force_login(stranger)

    answer = client.get(f"/api/groups/{group.pk}/requests/{request.pk}/costs")

    assert answer.status_code == 404
    assert answer.json()["code"] == "NOT_FOUND"
