"""The export's writers, pure (groups/export/documents.py): whatever the turns hold, the JSON
written a chunk at a time is one document valid against its schema, and the Markdown names
every speaker and keeps a tool call's arguments inside their code span."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from markdown_it import MarkdownIt

from groups.export.documents import json_chunks, markdown_chunks
from groups.export.records import (
    ApprovalRecord,
    ConversationRecord,
    ExportRecord,
    RequestRecord,
    Speaker,
    ToolCallRecord,
    ToolResultRecord,
    TurnRecord,
)

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "schema" / "conversation-export.schema.json").read_text()
)
AT = datetime(2026, 12, 4, 18, 0, tzinfo=UTC)
OWNER = Speaker(kind="owner", name="Robin")

text = st.text(min_size=0, max_size=40)
names = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz ", min_size=1)
agents = st.builds(
    lambda pk, name: Speaker(kind="agent", name=name.strip() or "A", agent_id=pk, handle=f"a{pk}"),
    st.integers(1, 50),
    names,
)
calls = st.builds(
    ToolCallRecord,
    id=st.text(min_size=1, max_size=8),
    name=st.sampled_from(["file.write", "group.ask", "http.fetch"]),
    arguments=st.dictionaries(st.text(max_size=8), text, max_size=3),
)


@st.composite
def turns(draw) -> list[TurnRecord]:
    out = []
    for seq in range(1, draw(st.integers(0, 6)) + 1):
        call = draw(st.lists(calls, max_size=2))
        out.append(
            TurnRecord(
                id=seq,
                seq=seq,
                at=AT,
                kind=draw(st.sampled_from(["turn", "coordination", "activity", "notice"])),
                speaker=draw(st.one_of(st.just(OWNER), agents)),
                text=draw(text),
                tool_calls=tuple(call),
                tool_results=tuple(
                    ToolResultRecord(call_id=c.id, content=draw(text), is_error=draw(st.booleans()))
                    for c in call
                ),
            )
        )
    return out


def record(thread: list[TurnRecord]) -> ExportRecord:
    approvals = tuple(
        ApprovalRecord(
            id=i,
            tool_call_id=c.id,
            request_id=1,
            agent=t.speaker,
            action_name=c.name,
            arguments=c.arguments,
            approved_arguments=None,
            status="approved",
            decided_by="Robin",
            surface="telegram",
            reason="",
            created_at=AT,
            decided_at=AT,
            executed_at=None,
        )
        for i, (t, c) in enumerate(((t, c) for t in thread for c in t.tool_calls), start=1)
        if t.speaker.agent_id
    )
    request = RequestRecord(
        id=1,
        state="completed",
        source="owner",
        outcome_code="",
        outcome="",
        created_at=AT,
        started_at=AT,
        finished_at=AT,
    )
    conversation = ConversationRecord(
        id=1,
        title="",
        status="open",
        created_at=AT,
        closed_at=None,
        carried_summary="",
        requests=(request,),
        approvals=approvals,
        turns=iter(thread),
    )
    return ExportRecord(
        scope="group",
        title="Team",
        exported_at=AT,
        owner="Robin",
        group_id=1,
        agent=None,
        members=(),
        conversations=iter([conversation]),
    )


@settings(max_examples=60, deadline=None)
@given(turns())
def test_the_json_written_in_chunks_is_one_document_valid_against_its_schema(thread):
    document = json.loads("".join(json_chunks(record(thread))))
    assert not list(Draft202012Validator(SCHEMA).iter_errors(document))
    [conversation] = document["conversations"]
    assert [t["text"] for t in conversation["turns"]] == [t.text for t in thread]
    assert [c["arguments"] for t in conversation["turns"] for c in t["tool_calls"]] == [
        c.arguments for t in thread for c in t.tool_calls
    ]


@settings(max_examples=60, deadline=None)
@given(turns())
def test_the_markdown_names_every_speaker_and_keeps_each_call_in_its_code_span(thread):
    written = "".join(markdown_chunks(record(thread)))
    for turn in thread:
        assert f"**{turn.speaker.name}**" in written
    spans = [
        child.content
        for token in MarkdownIt().parse(written)
        if token.type == "inline"
        for child in token.children or []
        if child.type == "code_inline"
    ]
    for turn in thread:
        for call in turn.tool_calls:
            assert call.name in spans


def test_a_code_fence_a_turn_leaves_open_is_closed_before_the_next_turn():
    ledger = Speaker(kind="agent", name="Ledger", agent_id=2, handle="ledger")
    call = ToolCallRecord(id="c1", name="file.write", arguments={"title": "Plan"})
    thread = [
        TurnRecord(id=1, seq=1, at=AT, kind="turn", speaker=OWNER, text="```python\nprint(1)"),
        TurnRecord(id=2, seq=2, at=AT, kind="turn", speaker=ledger, text="", tool_calls=(call,)),
    ]
    tokens = MarkdownIt().parse("".join(markdown_chunks(record(thread))))
    [fence] = [t for t in tokens if t.type == "fence"]
    assert fence.content == "print(1)\n"
    assert any(t.type == "inline" and "Ledger" in t.content for t in tokens)
