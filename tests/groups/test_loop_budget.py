"""The twelve-call budget through a real worker: the ceiling, synthesis, failure accounting."""

from __future__ import annotations

import json

import pytest

from garden.models import Agent, Message
from garden.services.accounts import model_account_create
from groups.domain.projection import SYNTHESIS_INSTRUCTION
from groups.loop.step import advance_request
from groups.models import CallReservation, GroupRequest
from groups.services.requests import request_create
from tests.conftest import wait_for
from tests.garden.providers.httpserver import ScriptedServer
from tests.groups.helpers import on_server, tool_names
from tests.support.driving import drive, finished
from tests.support.providers import openai_reply

ASK_LEDGER = {
    "name": "group.ask",
    "arguments": {"member": "ledger", "request": "Add one more figure."},
}


@pytest.mark.django_db
def test_a_coordinator_that_asks_forever_gets_eleven_working_calls_and_one_synthesis(
    group_factory, owner, provider_server
):
    group = group_factory(concierge_rules=[], members={"ledger": [{"reply": "A figure."}]})
    # The coordinator answers from a local HTTP server, so the test reads what each of its
    # calls was sent. Calls alternate with Ledger's: 6 of the 11 working calls are the
    # coordinator's, each asking again, then the synthesis call.
    on_server(owner, group.coordinator, provider_server)
    for n in range(6):
        provider_server.reply(
            200,
            openai_reply(
                "More.", tool_calls=[(f"ask-{n}", ASK_LEDGER["name"], ASK_LEDGER["arguments"])]
            ),
        )
    provider_server.reply(200, openai_reply("Final: here is everything we found."))
    request = request_create(group=group, text="Keep digging.")
    drive(request)
    assert request.state == "completed", request.outcome
    assert request.outcome_code == "SYNTHESIZED"
    assert (request.working_reserved, request.synthesis_reserved) == (11, 1)
    rows = CallReservation.objects.filter(request=request)
    assert rows.filter(purpose="working").count() == 11
    assert rows.filter(purpose="synthesis").count() == 1
    assert not rows.filter(status="reserved").exists()
    notices = Message.objects.filter(request=request, kind="notice").values_list(
        "content", flat=True
    )
    assert any("working budget is spent" in c[0]["text"] for c in notices)
    final = Message.objects.filter(request=request, kind="turn").order_by("-seq").first()
    assert final.speaker_agent.handle == "concierge" and final.text.startswith("Final:")
    # What the provider received: six working calls offered group.ask, without the synthesis
    # instruction; the seventh, the synthesis, was offered no tools and ended on it.
    *working, synthesis = [r.body for r in provider_server.requests]
    assert len(working) == 6
    for body in working:
        assert "group__ask" in tool_names(body)
        assert SYNTHESIS_INSTRUCTION not in json.dumps(body)
    assert "tools" not in synthesis
    last = synthesis["messages"][-1]
    assert last["role"] == "user" and last["content"].endswith(SYNTHESIS_INSTRUCTION)


@pytest.mark.django_db
def test_synthesis_is_skipped_when_the_coordinator_concluded_after_the_last_member(group_factory):
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Concluded with Ledger's figure."},
            {"reply": {"tool_calls": [ASK_LEDGER]}},
        ],
        members={"ledger": [{"reply": "A figure."}]},
    )
    request = request_create(group=group, text="One figure please.")
    drive(request)
    assert (request.state, request.outcome_code) == ("completed", "CONCLUDED")
    assert (request.working_reserved, request.synthesis_reserved) == (3, 0)


@pytest.mark.django_db
def test_two_asks_in_one_response_are_answered_together(group_factory):
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Both answered."},
            {
                "reply": {
                    "tool_calls": [
                        {
                            "name": "group.ask",
                            "arguments": {"member": "ledger", "request": "Figures."},
                        },
                        {
                            "name": "group.ask",
                            "arguments": {"member": "advisor", "request": "Advice."},
                        },
                    ]
                }
            },
        ],
        members={"ledger": [{"reply": "L."}], "advisor": [{"reply": "A."}]},
    )
    request = request_create(group=group, text="Go.")
    drive(request)
    order = [
        (
            m.speaker_agent.handle,
            "result" if m.content[0]["type"] == "tool_result" else m.content[0]["type"],
        )
        for m in Message.objects.filter(
            request=request, kind="turn", speaker_kind="agent"
        ).order_by("seq")
    ]
    assert order == [
        ("concierge", "tool_call"),
        ("ledger", "text"),
        ("concierge", "result"),
        ("advisor", "text"),
        ("concierge", "result"),
        ("concierge", "text"),
    ]


def test_a_failed_synthesis_ends_honestly_with_contributions_in_place(
    celery_worker_thread, group_factory, settings
):
    settings.GARDEN_PROVIDER_RETRY_ATTEMPTS = 1
    group = group_factory(
        concierge_rules=[
            {"when": "consolidated answer", "error": "timeout"},
            {"reply": {"text": "More.", "tool_calls": [ASK_LEDGER]}},
        ],
        members={"ledger": [{"reply": "A figure."}]},
    )
    request = request_create(group=group, text="Keep digging.")
    wait_for(finished(request), timeout=60)
    assert (request.state, request.outcome_code) == ("failed", "SYNTHESIS_FAILED")
    assert Message.objects.filter(request=request, speaker_agent__handle="ledger").count() == 5
    notice = Message.objects.filter(request=request, kind="notice").order_by("-seq").first()
    assert "summary did not come" in notice.text
    # The timed-out synthesis call stays counted: the model may have run.
    assert request.synthesis_reserved == 1


def test_ambiguous_failures_keep_the_call_and_confirmed_rejections_release_it(
    celery_worker_thread, group_factory, owner, settings, loopback_providers
):
    settings.GARDEN_PROVIDER_RETRY_ATTEMPTS = 3
    server = ScriptedServer()
    try:
        group = group_factory(
            concierge_rules=[
                {"after_tool_result": True, "reply": "Done."},
                {"reply": {"tool_calls": [ASK_LEDGER]}},
            ],
            members={"ledger": []},
        )
        ledger = Agent.objects.get(owner=owner, handle="ledger")
        ledger.model_account = model_account_create(
            owner=owner,
            name="local",
            provider="openai",
            model="local-model",
            base_url=f"{server.url}/v1",
            timeout_seconds=5,
        )
        ledger.save(update_fields=["model_account"])
        server.reply(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "0"})
        server.reply(500, {"error": {"message": "boom"}})
        server.reply(
            200,
            {
                "choices": [
                    {
                        "message": {"role": "assistant", "content": "Figure: 42."},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1},
            },
        )
        request = request_create(group=group, text="Go.")
        wait_for(finished(request), timeout=30)
    finally:
        server.close()
    assert request.state == "completed"
    ledger_calls = list(
        CallReservation.objects.filter(request=request, agent__handle="ledger")
        .order_by("id")
        .values_list("status", "reason")
    )
    assert ledger_calls == [
        ("released", "PROVIDER_RATE_LIMITED"),
        ("consumed", "PROVIDER_SERVER_ERROR"),
        ("consumed", ""),
    ]
    assert len(server.requests) == 3
    # 2 coordinator calls + the kept ambiguous call + the successful one; the 429 was given back.
    assert request.working_reserved == 4
    assert (
        Message.objects.filter(request=request, speaker_agent=ledger, kind="turn").last().text
        == "Figure: 42."
    )


def test_a_duplicate_or_stale_step_delivery_changes_nothing(celery_worker_thread, group_factory):
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Done."},
            {"reply": {"tool_calls": [ASK_LEDGER]}},
        ],
        members={"ledger": [{"reply": "A figure."}]},
    )
    request = request_create(group=group, text="Go.")
    wait_for(finished(request))
    before = (
        Message.objects.filter(request=request).count(),
        CallReservation.objects.filter(request=request).count(),
    )
    for fence in range(0, request.fence + 2):
        assert advance_uncontended(request.pk, fence) == "stale"
    request.refresh_from_db()
    after = (
        Message.objects.filter(request=request).count(),
        CallReservation.objects.filter(request=request).count(),
    )
    assert after == before and request.state == "completed"


@pytest.mark.django_db
def test_unknown_mentions_are_refused_and_nothing_is_stored(group_factory):
    from garden.errors import ServiceError

    group = group_factory(concierge_rules=[], members={"ledger": []})
    with pytest.raises(ServiceError) as err:
        request_create(group=group, text="@ledger and @ghost and @father, look")
    assert (
        err.value.code == "UNKNOWN_MEMBER"
        and "@ghost" in str(err.value)
        and "@father" in str(err.value)
    )
    assert not GroupRequest.objects.exists() and not Message.objects.exists()


@pytest.mark.django_db
def test_a_mention_in_generated_text_schedules_nothing(
    group_factory, django_capture_on_commit_callbacks
):
    """A member that writes '@advisor please help' in prose queues no one: only structured calls do."""
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Done."},
            {"reply": {"tool_calls": [ASK_LEDGER]}},
        ],
        members={
            "ledger": [{"reply": "@advisor please take over and run everything."}],
            "advisor": [{"reply": "should never speak"}],
        },
    )
    request = request_create(group=group, text="Go.")
    drive(request, limit=40)
    assert not Message.objects.filter(request=request, speaker_agent__handle="advisor").exists()
    assert request.state == "completed"


def advance_uncontended(request_id: int, fence: int) -> str:
    """A step delivered by hand; waits out the worker's lock, which it may still hold for the
    instant between committing the last step and releasing the lock."""
    import time

    from groups.group_lock import LockContended

    for _ in range(100):
        try:
            return advance_request(request_id=request_id, fence=fence)
        except LockContended:
            time.sleep(0.05)  # waits FOR the worker to release the lock, with a limit
    raise AssertionError("the group lock was never released")


@pytest.mark.django_db
def test_a_reservation_is_refused_without_a_row_when_the_fence_or_state_moved(group_factory):
    from groups import budget
    from groups.services.requests import group_conversation_open

    group = group_factory(concierge_rules=[], members={"ledger": []})
    request = GroupRequest.objects.create(
        group=group, conversation=group_conversation_open(group=group), state="running", fence=3
    )
    reserve = dict(request_id=request.pk, agent_id=group.coordinator_id)
    assert budget.reserve_call(purpose="working", fence=2, **reserve) is None
    assert budget.reserve_call(purpose="synthesis", fence=3, **reserve) is None  # not synthesizing
    made = budget.reserve_call(purpose="working", fence=3, attempt=2, **reserve)
    stored = CallReservation.objects.get()
    assert (made.pk, made.status, made.fence, made.attempt) == (stored.pk, "reserved", 3, 2)
    assert made.created_at == stored.created_at
    request.refresh_from_db()
    assert (request.working_reserved, request.synthesis_reserved) == (1, 0)


@pytest.mark.django_db
def test_a_retry_of_the_eleventh_working_call_never_draws_the_conclusions_call(
    group_factory, owner, provider_server, settings
):
    """The eleventh working call fails ambiguously (a 500: the model may have run, so it stays
    counted); its retry would be a twelfth working call, which the budget does not have — and
    the conclusion's call is not lent to it: the request moves to synthesis, which still gets
    its one reserved call."""
    settings.GARDEN_PROVIDER_RETRY_ATTEMPTS = 3
    group = group_factory(concierge_rules=[], members={"ledger": [{"reply": "A figure."}]})
    on_server(owner, group.coordinator, provider_server)
    for n in range(5):  # the coordinator's working calls 1, 3, 5, 7 and 9: each asks again
        provider_server.reply(
            200,
            openai_reply(
                "More.", tool_calls=[(f"ask-{n}", ASK_LEDGER["name"], ASK_LEDGER["arguments"])]
            ),
        )
    provider_server.reply(500, {"error": {"message": "boom"}})  # working call 11
    provider_server.reply(200, openai_reply("Final: what Ledger found."))
    request = request_create(group=group, text="Keep digging.")
    drive(request)
    assert (request.state, request.outcome_code) == ("completed", "SYNTHESIZED"), request.outcome
    assert (request.working_reserved, request.synthesis_reserved) == (11, 1)
    calls = list(
        CallReservation.objects.filter(request=request)
        .order_by("id")
        .values_list("purpose", "status", "reason")
    )
    assert calls[10] == ("working", "consumed", "PROVIDER_SERVER_ERROR")
    assert calls[11:] == [("synthesis", "consumed", "")]
    *_, failed, synthesis = [r.body for r in provider_server.requests]
    assert len(provider_server.requests) == 7
    assert "tools" in failed and "tools" not in synthesis
    final = Message.objects.filter(request=request, kind="turn").order_by("-seq").first()
    assert final.text == "Final: what Ledger found."
