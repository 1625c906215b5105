"""The 1:1 path through a real Celery worker: the reply is stored under the agent as speaker."""

from datetime import timedelta

import pytest
from django.utils import timezone

from garden.models import Agent, Message
from garden.services.accounts import model_account_create
from garden.services.agents import agent_create
from garden.services.chat import chat_reply, conversation_post_owner_message
from garden.services.conversations import conversation_create
from tests.conftest import wait_for


def make_agent(owner, handle, rules, default="ok"):
    account = model_account_create(
        owner=owner, name=handle, provider="scripted", options={"rules": rules, "default": default}
    )
    return agent_create(owner=owner, handle=handle, name=handle.title(), model_account=account)


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
def test_confirmed_rejections_are_retried_within_the_ceiling(owner, settings):
    settings.GARDEN_PROVIDER_RETRY_ATTEMPTS = 3
    ledger = make_agent(owner, "ledger", [{"error": "rejected"}])
    conv = conversation_create(owner=owner, agent=ledger)
    sent = conversation_post_owner_message(owner=owner, conversation=conv, text="hi")
    reply = chat_reply(message_id=sent.pk)
    assert reply.kind == "notice" and "refused" in reply.text


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
        account = model_account_create(
            owner=owner,
            name="local",
            provider="openai",
            model="m",
            base_url=f"{server.url}/v1",
            timeout_seconds=5,
        )
        agent = agent_create(owner=owner, handle="ledger", name="Ledger", model_account=account)
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
