"""The 1:1 path through a real Celery worker: the reply is stored under the agent as speaker."""

import pytest

from garden.models import Agent, Message
from garden.services.agents import agent_create, model_account_create
from garden.services.chat import chat_reply, conversation_post_owner_message
from garden.services.conversations import conversation_create
from tests.conftest import wait_for


def make_agent(owner, handle, rules, default="ok"):
    account = model_account_create(owner=owner, name=handle, provider="scripted",
                                   options={"rules": rules, "default": default})
    return agent_create(owner=owner, handle=handle, name=handle.title(), model_account=account)


def transcript(conversation):
    return [(m.speaker_kind, m.speaker_agent.handle if m.speaker_agent_id else None, m.kind, m.text)
            for m in conversation.messages.order_by("seq")]


@pytest.mark.redis
def test_a_turn_runs_through_a_real_worker_on_redis(celery_worker_thread, owner):
    ledger = make_agent(owner, "ledger", [{"when": "spend", "reply": "Spending was 3,150."}])
    conv = conversation_create(owner=owner, agent=ledger)
    sent = conversation_post_owner_message(owner=owner, conversation=conv, text="How was spending?")
    wait_for(lambda: Message.objects.filter(in_reply_to=sent).exists())
    assert transcript(conv) == [("owner", None, "turn", "How was spending?"),
                                ("agent", "ledger", "turn", "Spending was 3,150.")]


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

    from garden.services.chat import ChatError

    ledger = make_agent(owner, "ledger", [])
    conv = conversation_create(owner=owner, agent=ledger)
    Agent.objects.filter(pk=ledger.pk).update(removed_at=timezone.now())
    conv.refresh_from_db()
    with pytest.raises(ChatError) as err:
        conversation_post_owner_message(owner=owner, conversation=conv, text="hi")
    assert err.value.code == "AGENT_CANNOT_RUN"
    assert conv.messages.count() == 0
