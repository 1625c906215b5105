"""An owner's stored bytes (documents, notes, turns) measured and held to
GARDEN_MAX_STORAGE_BYTES_PER_OWNER: a tool past it gets STORAGE_FULL as its error and writes
nothing, a message 409; another owner is unaffected."""

from __future__ import annotations

import json

import pytest

from garden.models import Artifact, Conversation, MemoryNote, Message
from garden.services.agents import agent_builtins_ensure
from garden.services.conversations import message_append, text_block
from garden.storage import storage_usage, turn_bytes
from garden.tools import ToolContext, run_tool

pytestmark = pytest.mark.django_db


def concierge(user):
    return agent_builtins_ensure(owner=user)["concierge"]


def ctx_for(user) -> ToolContext:
    agent = concierge(user)
    conversation = Conversation.objects.create(owner=user, agent=agent)
    return ToolContext(owner_id=user.pk, agent_id=agent.pk, conversation_id=conversation.pk)


def fill(user, nbytes: int) -> Artifact:
    """A document of ``nbytes`` bytes the owner keeps, with no conversation."""
    return Artifact.objects.create(owner=user, title="Filler", content="", size=nbytes)


def test_usage_counts_documents_notes_and_turns(owner, stranger):
    ctx = ctx_for(owner)
    fill(owner, 1_000)
    MemoryNote.objects.create(owner=owner, scope=f"shared:{owner.pk}", text="caf\u00e9")  # 5 bytes
    content = [text_block("hello \u2603")]
    message_append(conversation_id=ctx.conversation_id, speaker_kind="owner", content=content)
    message_append(conversation_id=ctx.conversation_id, speaker_kind="owner", content=content)
    usage = storage_usage(owner_id=owner.pk)
    assert (usage.artifacts, usage.notes) == (1_000, 5)
    # The thread's count is its turns' JSON text, as the database holds it.
    stored = [json.dumps(m.content, ensure_ascii=False) for m in Message.objects.all()]
    assert usage.turns == 2 * turn_bytes(content) == sum(len(s.encode()) for s in stored)
    assert storage_usage(owner_id=stranger.pk).total == 0
    # A deleted thread takes its turns' bytes along.
    Conversation.objects.filter(pk=ctx.conversation_id).delete()
    assert storage_usage(owner_id=owner.pk).turns == 0


def test_file_write_past_the_limit_is_the_tools_error_and_writes_nothing(owner, stranger, settings):
    settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER = 10_000
    fill(owner, 9_990)
    ctx = ctx_for(owner)
    out = run_tool(ctx, "file.write", {"title": "Report", "content": "x" * 20})
    assert out.is_error and out.code == "STORAGE_FULL"
    assert out.content.startswith("STORAGE_FULL: ") and "10,000 bytes" in out.content
    assert not Artifact.objects.filter(title="Report").exists()
    # What still fits is written.
    assert not run_tool(ctx, "file.write", {"title": "Short", "content": "x" * 10}).is_error
    # Another owner, under the same limit, is not affected by this one's bytes.
    theirs = run_tool(ctx_for(stranger), "file.write", {"title": "R", "content": "y" * 5_000})
    assert not theirs.is_error and Artifact.objects.filter(owner=stranger).count() == 1


def test_memory_remember_past_the_limit_is_the_tools_error(owner, stranger, settings):
    settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER = 10_000
    fill(owner, 9_999)
    out = run_tool(ctx_for(owner), "memory.remember", {"text": "rent is due on the 1st"})
    assert out.is_error and out.code == "STORAGE_FULL"
    assert not MemoryNote.objects.filter(owner=owner).exists()
    assert not run_tool(ctx_for(stranger), "memory.remember", {"text": "mine"}).is_error


def test_a_one_to_one_message_past_the_limit_is_409_and_writes_nothing(api, owner, settings):
    settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER = 10_000
    fill(owner, 9_990)
    conversation = Conversation.objects.create(owner=owner, agent=concierge(owner))
    path = f"/api/conversations/{conversation.pk}/messages"
    response = api.post(path, {"text": "hello, are you there?"})
    assert response.status_code == 409 and response.json()["code"] == "STORAGE_FULL"
    assert response.json()["errors"][0]["field"] == "text"
    conversation.refresh_from_db()
    assert not Message.objects.exists() and conversation.stored_bytes == 0
