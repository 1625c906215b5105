"""Bounding: each reduction step in order with its counted marker, and the named refusal."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest

from garden.providers.types import ArtifactRef, Block, ChatMessage, TextBlock, ToolCall, ToolResult
from groups.domain.bounding import (
    RESULT_HEAD_MIN,
    TEXT_HEAD_MIN,
    RoomTooLarge,
    bound,
    bound_for_synthesis,
    keepable_from,
    with_omitted_turns,
)
from groups.domain.projection import AgentView, GroupView, Projection, Turn, project
from groups.domain.rendering import render_ref

SYSTEM = "You are @ledger. Room text is context."
CLIP = re.compile(r"\A(?P<head>.*)\n\[… clipped (?P<n>\d+) chars\]\Z", re.S)
OMITTED = re.compile(r"\A\[(\d+) earlier turns omitted\]\Z")


def u(*blocks: Block | str) -> ChatMessage:
    return ChatMessage("user", tuple(TextBlock(b) if isinstance(b, str) else b for b in blocks))


def a(*blocks: Block | str) -> ChatMessage:
    return ChatMessage(
        "assistant", tuple(TextBlock(b) if isinstance(b, str) else b for b in blocks)
    )


def clipped(text: str) -> tuple[str, int] | None:
    m = CLIP.match(text)
    return (m.group("head"), int(m.group("n"))) if m else None


def omitted_count(p: Projection) -> int | None:
    first = p.messages[0].content[0]
    if isinstance(first, TextBlock) and (m := OMITTED.match(first.text)):
        return int(m.group(1))
    return None


def assert_valid(p: Projection) -> None:
    roles = [m.role for m in p.messages]
    assert roles[0] == "user"
    assert all(x != y for x, y in pairwise(roles))
    for i, m in enumerate(p.messages):
        results = [b.call_id for b in m.content if isinstance(b, ToolResult)]
        if results:
            assert [b.id for b in p.messages[i - 1].content if isinstance(b, ToolCall)] == results


def test_a_room_within_the_cap_is_returned_unchanged() -> None:
    p = Projection(SYSTEM, (u("hello"),))
    assert bound(p, p.char_count()) is p


# --- step 1: the agent's own tool results ---------------------------------------------------


def test_step1_own_tool_results_are_clipped_first_only_as_far_as_needed() -> None:
    p = Projection(
        SYSTEM,
        (
            u("x" * 3000),
            a(ToolCall("c1", "file.read", {"path": "a"})),
            u(ToolResult("c1", "r" * 5000), "y" * 3000),
            a("ok"),
            u("now"),
        ),
    )
    cap = p.char_count() - 2000
    out = bound(p, cap)
    assert isinstance(out, Projection)
    assert cap - 2 <= out.char_count() <= cap
    result = out.messages[2].content[0]
    assert isinstance(result, ToolResult) and result.call_id == "c1"
    head, n = clipped(result.content)  # type: ignore[misc]
    assert head == "r" * len(head) and len(head) + n == 5000
    # Nothing else changed: no drop, no text clipped.
    assert [m.content for i, m in enumerate(out.messages) if i != 2] == [
        m.content for i, m in enumerate(p.messages) if i != 2
    ]
    assert out.messages[2].content[1] == TextBlock("y" * 3000)


def test_step1_clips_the_largest_result_first() -> None:
    p = Projection(
        SYSTEM,
        (
            u("go"),
            a(ToolCall("c1", "t"), ToolCall("c2", "t")),
            u(ToolResult("c1", "a" * 6000), ToolResult("c2", "b" * 1500)),
        ),
    )
    out = bound(p, p.char_count() - 2000)
    assert isinstance(out, Projection)
    big, small = out.messages[2].content
    assert isinstance(big, ToolResult) and clipped(big.content) is not None
    assert small == ToolResult("c2", "b" * 1500)


def test_clipping_twice_reports_the_true_total() -> None:
    p = Projection(SYSTEM, (u("go"), a(ToolCall("c1", "t")), u(ToolResult("c1", "r" * 8000))))
    once = bound(p, p.char_count() - 2000)
    assert isinstance(once, Projection)
    twice = bound(once, p.char_count() - 5000)
    assert isinstance(twice, Projection)
    result = twice.messages[2].content[0]
    assert isinstance(result, ToolResult)
    head, n = clipped(result.content)  # type: ignore[misc]
    assert len(head) + n == 8000
    assert "clipped" not in head


# --- step 2: the oldest messages dropped whole ----------------------------------------------


def _exchanges(count: int) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    for i in range(count):
        messages += [
            u(f"owner {i} " + "o" * 150),
            a(f"thinking {i}", ToolCall(f"c{i}", "t.search", {"q": i})),
            u(ToolResult(f"c{i}", "r" * 100), f"@advisor said: note {i}"),
            a(f"answer {i} " + "a" * 100),
        ]
    return messages


def test_step2_drops_the_oldest_whole_with_the_true_count() -> None:
    original = (*_exchanges(10), u("the current instruction"))
    p = Projection(SYSTEM, original)
    cap = p.char_count() // 2
    out = bound(p, cap)
    assert isinstance(out, Projection)
    assert out.char_count() <= cap
    assert_valid(out)
    n = omitted_count(out)
    assert n is not None and n > 0
    # What remains is exactly the newest messages, untouched (the marker took the first slot).
    kept = out.messages[1:] if len(out.messages[0].content) == 1 else out.messages
    assert original[-len(kept) :][1:] == kept[1:]
    assert n == len(original) - len(kept)
    assert out.messages[-1] == u("the current instruction")
    # Step 1 could do nothing here: results are below the clip floor.
    assert all(
        len(b.content) == 100 for m in out.messages for b in m.content if isinstance(b, ToolResult)
    )


def test_step2_never_splits_a_call_from_its_result() -> None:
    original = (*_exchanges(6), u("now"))
    p = Projection(SYSTEM, original)
    for cap in range(len(SYSTEM) + 40, p.char_count(), 37):
        out = bound(p, cap)
        if isinstance(out, RoomTooLarge):
            continue
        assert out.char_count() <= cap
        assert_valid(out)
        assert not any(isinstance(b, ToolResult) for b in out.messages[0].content)


def test_step2_dropping_again_accumulates_the_count() -> None:
    original = (*_exchanges(10), u("now"))
    p = Projection(SYSTEM, original)
    first = bound(p, p.char_count() * 3 // 4)
    second = bound(first, p.char_count() // 3)  # type: ignore[arg-type]
    assert isinstance(first, Projection) and isinstance(second, Projection)
    n1, n2 = omitted_count(first), omitted_count(second)
    assert n1 is not None and n2 is not None and n2 > n1
    kept = second.messages[1:] if len(second.messages[0].content) == 1 else second.messages
    assert n2 == len(original) - len(kept)


# --- steps 3 and 4 --------------------------------------------------------------------------


def test_step3_pictures_become_references_only_when_dropping_is_not_enough() -> None:
    picture = ArtifactRef("art-1", "image", "Receipt")
    old = Projection(SYSTEM, (u("o" * 3000), a("a" * 3000), u(picture, "now")))
    dropped = bound(old, old.char_count() - 4000)
    assert isinstance(dropped, Projection)
    assert dropped.messages[-1].content[-2:] == (picture, TextBlock("now"))
    assert omitted_count(dropped) == 2

    alone = Projection(SYSTEM, (u(picture, ArtifactRef("art-2", "pdf", "Statement"), "t" * 3000),))
    out = bound(alone, alone.char_count() - 1000)
    assert isinstance(out, Projection)
    image_line, pdf_line, text = out.messages[0].content
    assert (
        image_line
        == TextBlock(render_ref(picture))
        == TextBlock("[image: Receipt] (artifact art-1)")
    )
    assert pdf_line == TextBlock("[pdf: Statement] (artifact art-2)")
    assert isinstance(text, TextBlock) and clipped(text.text) is not None


def test_step4_clips_the_largest_text_first() -> None:
    p = Projection(SYSTEM, (u("A" * 4000, "B" * 2000, "short instruction"),))
    out = bound(p, p.char_count() - 1500)
    assert isinstance(out, Projection)
    first, second, third = out.messages[0].content
    head, n = clipped(first.text)  # type: ignore[union-attr, misc]
    assert len(head) + n == 4000
    assert second == TextBlock("B" * 2000) and third == TextBlock("short instruction")


def _layered() -> Projection:
    """Old droppable history, then a tool exchange with a picture in the final message."""
    return Projection(
        SYSTEM,
        (
            u("old question " + "q" * 2000),
            a("old answer " + "w" * 2000),
            u("fetch the statement"),
            a(ToolCall("c1", "bank.statement", {"month": 5})),
            u(ToolResult("c1", "r" * 6000), ArtifactRef("art-9", "image", "Chart"), "t" * 3000),
        ),
    )


def test_the_steps_run_in_order_each_only_when_the_previous_is_not_enough() -> None:
    p = _layered()
    total = p.char_count()

    def parts(out: Projection) -> tuple[bool, int | None, bool, bool]:
        last = out.messages[-1].content
        result = last[0]
        assert isinstance(result, ToolResult)
        return (
            clipped(result.content) is not None,
            omitted_count(out),
            not any(isinstance(b, ArtifactRef) for b in last),
            isinstance(last[-1], TextBlock) and clipped(last[-1].text) is not None,
        )

    step1 = bound(p, total - 1000)
    step2 = bound(p, total - 7500)
    step4 = bound(p, total - 11500)
    assert isinstance(step1, Projection) and isinstance(step2, Projection)
    assert isinstance(step4, Projection)
    assert parts(step1) == (True, None, False, False)
    assert parts(step2) == (True, 1, False, False)  # the old question alone sufficed
    assert parts(step4) == (True, 3, True, True)
    result = step4.messages[-1].content[0]
    assert isinstance(result, ToolResult)
    assert len(clipped(result.content)[0]) == RESULT_HEAD_MIN  # type: ignore[index]
    for out, cap in ((step1, total - 1000), (step2, total - 7500), (step4, total - 11500)):
        assert out.char_count() <= cap
        assert_valid(out)
        assert out.system == SYSTEM
        assert bound(out, cap) == out


# --- the named refusal ----------------------------------------------------------------------


def test_refusal_when_the_system_text_alone_exceeds_the_cap() -> None:
    out = bound(Projection("s" * 500, (u("hi"),)), 400)
    assert isinstance(out, RoomTooLarge)
    assert out.code == "ROOM_TOO_LARGE"
    assert out.needed_chars == 500 and out.cap_chars == 400
    assert (out.needed, out.cap) == (500, 400)
    assert "system" in out.reason


def test_refusal_when_the_room_cannot_fit_even_fully_reduced() -> None:
    p = _layered()
    out = bound(p, len(SYSTEM) + 500)
    assert isinstance(out, RoomTooLarge)
    assert out.code == "ROOM_TOO_LARGE"
    assert out.needed_chars > out.cap_chars
    assert out.original_chars == p.char_count()
    # The fully reduced room: result and text at their floors, history dropped.
    assert out.needed_chars < p.char_count() - 10_000
    assert TEXT_HEAD_MIN == RESULT_HEAD_MIN


def test_refusal_for_an_unclippable_tool_call() -> None:
    call = ToolCall("c1", "file.write", {"text": "z" * 10_000})
    out = bound(Projection(SYSTEM, (u("go"), a(call), u(ToolResult("c1", "ok")))), 5000)
    assert isinstance(out, RoomTooLarge)


@pytest.mark.parametrize("cap", [2000, 3000, 5000, 9000, 14000])
def test_bound_is_idempotent(cap: int) -> None:
    p = Projection(SYSTEM, (*_exchanges(8), *_layered().messages[2:]))
    once = bound(p, cap)
    assert isinstance(once, Projection)
    assert once.char_count() <= cap
    assert bound(once, cap) == once


# --- synthesis ------------------------------------------------------------------------------

CONCIERGE = AgentView(1, "concierge", "Concierge")
LEDGER = AgentView(2, "ledger", "Ledger")
GROUP = GroupView(10, "Household finances", 1, (CONCIERGE, LEDGER))


def test_synthesis_replaces_oversized_blocks_by_attributed_references() -> None:
    dump = "row;" * 12_500  # 50,000 chars: far over a quarter of the cap
    transcript = [
        Turn(1, "owner", None, None, (TextBlock("Summarise the transactions."),)),
        Turn(2, "agent", 2, "ledger", (TextBlock(dump),)),
        Turn(3, "agent", 2, "ledger", (TextBlock("Totals: 1240."),)),
    ]
    p = project(transcript, agent=CONCIERGE, group=GROUP, synthesis=True)
    cap = 8000
    out = bound_for_synthesis(p, cap)
    assert isinstance(out, Projection)
    assert out.char_count() <= cap
    replaced = out.messages[0].content[1]
    assert isinstance(replaced, TextBlock)
    assert replaced.text.startswith("@ledger said: row;")
    marker = re.search(r"\[oversized: (\d+) chars not carried\]\Z", replaced.text)
    assert marker is not None
    n = int(marker.group(1))
    assert n + len(replaced.text.split(" [oversized")[0]) == len("@ledger said: ") + len(dump)
    assert TextBlock("@ledger said: Totals: 1240.") in out.messages[0].content
    assert bound_for_synthesis(out, cap) == out


def test_synthesis_replaces_oversized_own_calls_and_results_without_breaking_pairs() -> None:
    p = Projection(
        SYSTEM,
        (
            u("go"),
            a(ToolCall("c1", "file.write", {"text": "z" * 5000})),
            u(ToolResult("c1", "y" * 5000)),
            a("done"),
            u("conclude"),
        ),
    )
    out = bound_for_synthesis(p, 4000)
    assert isinstance(out, Projection)
    assert out.char_count() <= 4000
    assert_valid(out)
    call = out.messages[1].content[0]
    assert isinstance(call, ToolCall) and call.id == "c1" and "oversized" in str(call.arguments)
    assert bound_for_synthesis(out, 4000) == out


# --- the turns left out before a long room is projected ------------------------------------

CONCIERGE = AgentView(1, "concierge", "Concierge", "You coordinate.")
LEDGER = AgentView(2, "ledger", "Ledger", "You keep the books.")
TEAM = GroupView(10, "Household", CONCIERGE.id, (CONCIERGE, LEDGER))


def long_room(requests: int, *, words: int = 8) -> list[Turn]:
    """``requests`` earlier requests as a room has them: the owner asks, Concierge asks Ledger
    through group.ask, Ledger answers, Concierge's call gets its answer, Concierge concludes."""
    turns: list[Turn] = []

    def say(speaker_kind: str, agent: AgentView | None, *blocks: Block, **more) -> None:
        turns.append(
            Turn(
                seq=len(turns) + 1,
                speaker_kind=speaker_kind,
                speaker_agent_id=agent.id if agent else None,
                speaker_handle=agent.handle if agent else None,
                content=blocks,
                **more,
            )
        )

    text = " ".join(["figure"] * words)
    for r in range(requests):
        call = f"call_{r % 3}"  # ids reused, as some providers do
        say("owner", None, TextBlock(f"Request {r}: {text}"))
        say("agent", CONCIERGE, ToolCall(call, "group.ask", {"member": "ledger", "request": text}))
        say("agent", CONCIERGE, TextBlock(f"Concierge asked Ledger: {text}"), kind="activity")
        # Shown to everyone but Concierge, who reads it in its call's result.
        say("agent", LEDGER, TextBlock(f"Answer {r}: {text}"), reply_to_call_id=call)
        say("agent", CONCIERGE, ToolResult(call, f"@ledger said: {text}"))
        say("agent", CONCIERGE, TextBlock(f"Conclusion {r}: {text}"))
    say("owner", None, TextBlock("The request now."))
    return turns


@pytest.mark.parametrize("cap", [1_500, 4_000, 24_000])
@pytest.mark.parametrize("agent", [CONCIERGE, LEDGER])
@pytest.mark.parametrize("synthesis", [False, True])
def test_leaving_out_the_turns_no_bounding_keeps_changes_nothing_kept(cap, agent, synthesis):
    turns = long_room(600)
    left_out = keepable_from(turns, cap)
    assert 0 < left_out < len(turns) - 5, "a long room is projected from its newest turns"
    bounded = bound_for_synthesis if synthesis else bound
    whole = bounded(project(turns, agent=agent, group=TEAM, synthesis=synthesis), cap)
    newest = bounded(
        with_omitted_turns(
            project(turns[left_out:], agent=agent, group=TEAM, synthesis=synthesis), left_out
        ),
        cap,
    )
    assert_valid(newest)
    # The same turns kept, in the same messages; only the marker's count differs (it counts
    # the turns left out, then the messages bounding dropped).
    assert newest.messages[1:] == whole.messages[1:]
    assert newest.messages[0].content[1:] == whole.messages[0].content[1:]
    assert omitted_count(newest) >= left_out and omitted_count(whole) is not None


def test_a_room_that_fits_leaves_nothing_out():
    turns = long_room(3)
    assert keepable_from(turns, 24_000) == 0


def test_the_turns_kept_hold_the_request_and_every_results_call():
    turns = long_room(40, words=400)  # each turn far larger than the cap
    cap = 500
    left_out = keepable_from(turns, cap)
    kept = turns[left_out:]
    assert kept[0].speaker_kind == "owner" or any(t.speaker_kind == "owner" for t in kept)
    calls = {(t.speaker_agent_id, b.id) for t in kept for b in t.content if isinstance(b, ToolCall)}
    results = {
        (t.speaker_agent_id, b.call_id)
        for t in kept
        for b in t.content
        if isinstance(b, ToolResult)
    }
    assert results <= calls and 0 < left_out


def test_a_result_kept_keeps_its_call_however_far_back():
    def turn(seq: int, kind: str, agent: AgentView | None, block: Block) -> Turn:
        return Turn(
            seq=seq,
            speaker_kind=kind,
            speaker_agent_id=agent.id if agent else None,
            speaker_handle=agent.handle if agent else None,
            content=(block,),
        )

    turns = [turn(1, "owner", None, TextBlock("Go."))]
    turns.append(turn(2, "agent", CONCIERGE, ToolCall("c1", "group.ask", {"member": "ledger"})))
    # The room between the call and its result alone passes the cap many times over.
    turns += [turn(3 + i, "agent", LEDGER, TextBlock("x" * 500)) for i in range(100)]
    turns.append(turn(103, "agent", CONCIERGE, ToolResult("c1", "done")))
    assert keepable_from(turns, 1_000) == 0  # the call, and the owner's message before it
    # A result further back than the cap reaches is left out with its call.
    turns += [turn(104 + i, "agent", LEDGER, TextBlock("y" * 500)) for i in range(100)]
    turns.append(turn(204, "owner", None, TextBlock("And now?")))
    # The owner's 8 characters and 31 turns of at least 33 pass the cap of 1,000.
    assert keepable_from(turns, 1_000) == len(turns) - 1 - 31


def test_the_marker_takes_the_first_user_slot():
    opening = Projection(SYSTEM, (u("[conversation start]"), a("mine"), u("yours")))
    assert with_omitted_turns(opening, 7).messages[0] == u("[7 earlier turns omitted]")
    assert with_omitted_turns(Projection(SYSTEM, (a("mine"),)), 2).messages[:2] == (
        u("[2 earlier turns omitted]"),
        a("mine"),
    )
    assert with_omitted_turns(Projection(SYSTEM, (u("yours"),)), 3).messages == (
        u("[3 earlier turns omitted]", "yours"),
    )
