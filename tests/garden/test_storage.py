"""An owner's stored bytes (documents, notes, turns) measured and held to
GARDEN_MAX_STORAGE_BYTES_PER_OWNER: a tool past it gets STORAGE_FULL as its error and writes
nothing, a message 409; another owner is unaffected; pictures an MCP tool returns, kept at
once, never pass it together (PostgreSQL)."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection, connections, transaction

from garden.models import Artifact, Conversation, MemoryNote, Message
from garden.services.agents import agent_builtins_ensure
from garden.services.conversations import message_append, text_block
from garden.services.mcp import mcp_server_create
from garden.storage import storage_usage, turn_bytes
from garden.tools import ToolContext, run_tool
from tests.groups.helpers import png_bytes
from tests.mcp_server import mcp_server
from tests.support.workers import wait_for

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


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_pictures_kept_at_once_are_held_to_the_limit_under_the_owners_lock(owner, settings):
    """Eight MCP calls each return a picture, three of which fit. Their writes are held at the
    artifact table (a SHARE lock: reads pass, inserts wait) until all eight are waiting there,
    so each has checked whatever it checks before writing; then they go at once."""
    settings.GARDEN_EGRESS_ALLOW_MCP = ["127.0.0.1"]
    size = len(png_bytes())
    settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER = 3 * size + size // 2
    ctx = ctx_for(owner)
    outcomes, errors = [], []

    def call() -> None:
        try:
            outcomes.append(run_tool(ctx, "mcp.tracker.picture", {}))
        except Exception as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connections.close_all()

    with mcp_server() as server:
        mcp_server_create(owner=owner, name="tracker", url=server.url)
        threads = [threading.Thread(target=call) for _ in range(8)]
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {Artifact._meta.db_table} IN SHARE MODE")

            def all_waiting() -> bool:
                cursor.execute(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass",
                    [Artifact._meta.db_table],
                )
                return cursor.fetchone()[0] == len(threads)

            for t in threads:
                t.start()
            wait_for(all_waiting)
        for t in threads:
            t.join(60)
    assert not errors, errors[:3]
    kept = [o for o in outcomes if o.artifacts]
    refused = [o for o in outcomes if not o.artifacts]
    assert (len(kept), len(refused)) == (3, 5)
    assert all("was not kept: STORAGE_FULL" in o.content for o in refused), refused[0].content
    assert Artifact.objects.filter(owner=owner).count() == 3
    assert storage_usage(owner_id=owner.pk).total == 3 * size
