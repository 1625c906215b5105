"""The 1:1 path through a real Celery worker: the reply is stored under the agent as speaker."""

from datetime import timedelta

import pytest
from django.utils import timezone

from garden.models import Agent, Message
from garden.services.accounts import model_account_create
from garden.services.agents import agent_create
from garden.services.chat import ReplyLater, chat_reply, conversation_post_owner_message
from garden.services.conversations import conversation_create
from tests.conftest import wait_for


def make_agent(owner, handle, rules, default="ok"):
    account = model_account_create(
        owner=owner, name=handle, provider="scripted", options={"rules": rules, "default": default}
    )
    return agent_create(owner=owner, handle=handle, name=handle.title(), model_account=account)


def http_agent(owner, server):
    """Ledger on an OpenAI-compatible account at the local ``server``."""
    account = model_account_create(
        owner=owner,
        name="local",
        provider="openai",
        model="m",
        base_url=f"{server.url}/v1",
        timeout_seconds=5,
    )
    return agent_create(owner=owner, handle="ledger", name="Ledger", model_account=account)


def transcript(conversation):
    return [
        (m.speaker_kind, m.speaker_agent.handle if m.speaker_agent_id else None, m.kind, m.text)
        for m in conversation.messages.order_by("seq")
    ]


@pytest.mark.redis
def test_a_turn_runs_through_a_real_worker_on_redis(celery_worker_thread, owner):
    ledger = make_agent(owner, "ledger", [{"when": "spend", "reply": "Spending was 3,150."}])
    conv = conversation_create(owner=owner, agent=ledger)
    sent = conversation_post_owner_message(owner=owner, conversation=conv, text="How was spending?")
    wait_for(lambda: Message.objects.filter(in_reply_to=sent).exists())
    assert transcript(conv) == [
        ("owner", None, "turn", "How was spending?"),
        ("agent", "ledger", "turn", "Spending was 3,150."),
    ]


@pytest.mark.django_db
def test_a_duplicate_delivery_answers_once(owner):
    ledger = make_agent(owner, "ledger", [], default="once")
    conv = conversation_create(owner=owner, agent=ledger)
    sent = conversation_post_owner_message(owner=owner, conversation=conv, text="hi")
    first = chat_reply(message_id=sent.pk)
    assert first is not None and chat_reply(message_id=sent.pk) is None
    assert Message.objects.filter(in_reply_to=sent).count() == 1


@pytest.mark.django_db
def test_a_provider_failure_ends_with_an_honest_notice(owner, settings):
    settings.GARDEN_PROVIDER_RETRY_ATTEMPTS = 2
    ledger = make_agent(owner, "ledger", [{"error": "timeout"}])
    conv = conversation_create(owner=owner, agent=ledger)
    sent = conversation_post_owner_message(owner=owner, conversation=conv, text="hi")
    reply = chat_reply(message_id=sent.pk)
    assert reply.speaker_kind == "garden" and reply.kind == "notice"
    assert "PROVIDER_TIMEOUT" in reply.text


@pytest.mark.django_db
def test_a_message_whose_agent_lost_its_model_is_still_answered_and_frees_the_queue(
    owner, settings
):
    """Every unanswered message counts against the owner's queue however old, so each one gets
    an answer: an agent whose account went away after the message was sent answers with a
    notice, not a crashed task that leaves the message waiting for ever."""
    settings.GARDEN_MAX_QUEUED_PER_OWNER = 1
    ledger = make_agent(owner, "ledger", [], default="ok")
    conv = conversation_create(owner=owner, agent=ledger)
    sent = conversation_post_owner_message(owner=owner, conversation=conv, text="hi")
    Agent.objects.filter(pk=ledger.pk).update(model_account=None)
    reply = chat_reply(message_id=sent.pk)
    assert (reply.speaker_kind, reply.kind) == ("garden", "notice")
    assert "@ledger has no model now" in reply.text
    # Answered: the queue has room again (the agent needs a model to be addressed again).
    account = make_agent(owner, "ledger2", []).model_account
    Agent.objects.filter(pk=ledger.pk).update(model_account=account)
    conv.refresh_from_db()
    conversation_post_owner_message(owner=owner, conversation=conv, text="again")


@pytest.mark.django_db
def test_confirmed_rejections_are_retried_within_the_ceiling(owner, settings):
    settings.GARDEN_PROVIDER_RETRY_ATTEMPTS = 3
    ledger = make_agent(owner, "ledger", [{"error": "rejected"}])
    conv = conversation_create(owner=owner, agent=ledger)
    sent = conversation_post_owner_message(owner=owner, conversation=conv, text="hi")
    attempts = []
    attempt, first_at = 1, None
    while True:
        try:
            reply = chat_reply(message_id=sent.pk, attempt=attempt, first_at=first_at)
            break
        except ReplyLater as later:
            # Nothing is written while the retry waits for its delivery.
            assert not Message.objects.filter(in_reply_to=sent).exists()
            attempts.append(attempt)
            attempt, first_at = later.attempt, later.first_at
    assert attempts == [1, 2] and attempt == 3
    assert reply.kind == "notice" and "refused" in reply.text


@pytest.mark.postgres
@pytest.mark.redis
def test_a_429_is_tried_again_by_a_later_delivery_while_the_worker_answers_others(
    transactional_db, owner, stranger, loopback_providers
):
    """One worker thread: the rejected reply's wait is a countdown on the broker, so another
    owner's message is answered during it (with a sleep in the worker it could not be)."""
    from tests.conftest import threads_worker
    from tests.garden.providers.httpserver import Respond, ScriptedServer

    server = ScriptedServer()
    server.push(
        Respond(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "5"}),
        Respond(
            200,
            {
                "choices": [
                    {
                        "message": {"role": "assistant", "content": "After the wait."},
                        "finish_reason": "stop",
                    }
                ]
            },
        ),
    )
    try:
        ledger = http_agent(owner, server)
        quick = make_agent(stranger, "quick", [], default="Right away.")
        with threads_worker(1):
            slow = conversation_post_owner_message(
                owner=owner, conversation=conversation_create(owner=owner, agent=ledger), text="hi"
            )
            wait_for(lambda: len(server.requests) == 1, timeout=20)
            other = conversation_post_owner_message(
                owner=stranger,
                conversation=conversation_create(owner=stranger, agent=quick),
                text="hello",
            )
            answered = wait_for(
                lambda: Message.objects.filter(in_reply_to=other).first(), timeout=20
            )
            assert answered.text == "Right away."
            # The rejected reply is still waiting for its second attempt.
            assert not Message.objects.filter(in_reply_to=slow).exists()
            assert len(server.requests) == 1
            reply = wait_for(lambda: Message.objects.filter(in_reply_to=slow).first(), timeout=30)
    finally:
        server.close()
    assert (reply.speaker_kind, reply.kind, reply.text) == ("agent", "turn", "After the wait.")
    assert len(server.requests) == 2


@pytest.mark.django_db
def test_every_unanswered_message_counts_against_the_queue_cap_however_old(owner, settings):
    from garden.errors import QuotaExceeded

    settings.GARDEN_MAX_QUEUED_PER_OWNER = 2
    ledger = make_agent(owner, "ledger", [], default="ok")
    conv = conversation_create(owner=owner, agent=ledger)
    for text in ("one", "two"):
        conversation_post_owner_message(owner=owner, conversation=conv, text=text)
    # Waiting for an hour (a provider that keeps refusing, an owner whose slots are busy).
    Message.objects.filter(conversation=conv).update(created_at=timezone.now() - timedelta(hours=1))
    with pytest.raises(QuotaExceeded) as refused:
        conversation_post_owner_message(owner=owner, conversation=conv, text="three")
    assert refused.value.code == "QUEUE_FULL" and "2 messages waiting" in refused.value.message
    assert conv.messages.count() == 2
    # Answered ones stop counting.
    chat_reply(message_id=conv.messages.order_by("seq").first().pk)
    assert conversation_post_owner_message(owner=owner, conversation=conv, text="three")


@pytest.mark.django_db
def test_a_removed_agent_cannot_be_addressed(owner):
    from django.utils import timezone

    from garden.errors import ServiceError

    ledger = make_agent(owner, "ledger", [])
    conv = conversation_create(owner=owner, agent=ledger)
    Agent.objects.filter(pk=ledger.pk).update(removed_at=timezone.now())
    conv.refresh_from_db()
    with pytest.raises(ServiceError) as err:
        conversation_post_owner_message(owner=owner, conversation=conv, text="hi")
    assert err.value.code == "AGENT_CANNOT_RUN"
    assert conv.messages.count() == 0


@pytest.mark.django_db
def test_a_long_conversation_is_bounded_before_the_call(owner, loopback_providers, settings):
    """2,000 earlier turns of 1,000 characters: the model gets the newest that fit the cap, a
    marker for the rest, and the question itself — never the whole thread."""
    from garden.services.conversations import messages_append
    from tests.garden.providers.httpserver import ScriptedServer

    settings.GARDEN_CHAT_CAP_CHARS = 20_000
    server = ScriptedServer()
    server.reply(
        200,
        {
            "choices": [
                {"message": {"role": "assistant", "content": "Bounded."}, "finish_reason": "stop"}
            ]
        },
    )
    try:
        agent = http_agent(owner, server)
        conv = conversation_create(owner=owner, agent=agent)
        history = [
            Message(
                conversation=conv,
                speaker_kind="owner" if i % 2 == 0 else "agent",
                speaker_agent=None if i % 2 == 0 else agent,
                content=[{"type": "text", "text": f"turn {i} " + "x" * 990}],
            )
            for i in range(2_000)
        ]
        messages_append(conversation_id=conv.pk, messages=history)
        # Each earlier owner turn was answered (by the agent turn after it).
        stored = list(conv.messages.order_by("seq"))
        for asked, answer in zip(stored[::2], stored[1::2], strict=True):
            answer.in_reply_to = asked
        Message.objects.bulk_update(stored[1::2], ["in_reply_to"])
        Message.objects.filter(conversation=conv).update(
            created_at=timezone.now() - timedelta(days=1)
        )
        question = conversation_post_owner_message(
            owner=owner, conversation=conv, text="And the total?"
        )
        reply = chat_reply(message_id=question.pk)
    finally:
        server.close()
    assert reply.text == "Bounded."
    sent = server.requests[0].body["messages"]
    size = sum(
        len(m["content"] if isinstance(m["content"], str) else str(m["content"])) for m in sent
    )
    assert size <= 20_000
    assert "omitted" in sent[0]["content"] and sent[0]["role"] == "user"
    assert sent[-1] == {"role": "user", "content": "And the total?"}
    assert "turn 1999 " in str(sent) and "turn 0 " not in str(sent)


@pytest.mark.django_db
def test_a_reply_whose_owner_has_no_free_call_slot_writes_nothing_and_waits(owner, settings):
    from garden.services.chat import CallSlotsBusy
    from garden.slots import slot_acquire, slot_release

    settings.GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER = 1
    ledger = make_agent(owner, "ledger", [], default="Now.")
    conv = conversation_create(owner=owner, agent=ledger)
    sent = conversation_post_owner_message(owner=owner, conversation=conv, text="hi")
    held = slot_acquire(owner_id=owner.pk)
    try:
        with pytest.raises(CallSlotsBusy):
            chat_reply(message_id=sent.pk)
        assert not Message.objects.filter(in_reply_to=sent).exists()
    finally:
        slot_release(owner_id=owner.pk, token=held)
    assert chat_reply(message_id=sent.pk).text == "Now."
