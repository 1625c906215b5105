"""Reduce a projection to the room's character cap before every model call.

Steps run in a fixed order, each only as far as needed, and every change leaves a counted
marker; a room that still cannot fit is refused by name, never sent short.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from garden.providers.types import ArtifactRef, Block, ChatMessage, TextBlock, ToolCall, ToolResult
from groups.domain.projection import CONVERSATION_START, Projection
from groups.domain.rendering import block_chars, message_chars, render_ref
from groups.domain.turns import Turn

# Pictures and documents an adapter may send inline; step 3 turns them into text lines.
INLINE_KINDS = frozenset({"image", "document", "pdf"})
# The shortest head a clipped tool result or text keeps: below this a clip says nothing useful.
RESULT_HEAD_MIN = 200
TEXT_HEAD_MIN = 200
# In synthesis, a head this long keeps the attribution ("@ledger said: …") of a replaced block.
OVERSIZED_HEAD = 80

_CLIP_RE = re.compile(r"\n\[… clipped (\d+) chars\]\Z")
_OMITTED_RE = re.compile(r"\[(\d+) earlier turns omitted\]\Z")
_OVERSIZED_RE = re.compile(r" \[oversized: (\d+) chars not carried\]\Z")
_OVERSIZED_ARGS_KEY = "oversized_arguments"


@dataclass(frozen=True)
class RoomTooLarge:
    """The named refusal: even fully reduced, the room needs more than the cap allows."""

    needed_chars: int
    cap_chars: int
    reason: str
    original_chars: int = 0
    code: Literal["ROOM_TOO_LARGE"] = field(default="ROOM_TOO_LARGE", init=False)

    @property
    def needed(self) -> int:
        return self.needed_chars

    @property
    def cap(self) -> int:
        return self.cap_chars


# --- markers --------------------------------------------------------------------------------


def clip_marker(removed: int) -> str:
    return f"\n[… clipped {removed} chars]"


def omitted_marker(count: int) -> str:
    return f"[{count} earlier turns omitted]"


def _split_clip(text: str) -> tuple[str, int]:
    """Separate an earlier clip marker so a second clip reports the true total."""
    match = _CLIP_RE.search(text)
    if match is None:
        return text, 0
    return text[: match.start()], int(match.group(1))


def _clip_to(text: str, keep: int) -> str:
    base, prior = _split_clip(text)
    return base[:keep] + clip_marker(prior + len(base) - keep)


# --- the steps ------------------------------------------------------------------------------


@dataclass
class _Room:
    """The mutable working copy one bound() call reduces."""

    system: str
    messages: list[ChatMessage]
    sizes: list[int]
    total: int

    def replace(self, index: int, message: ChatMessage) -> None:
        size = message_chars(message)
        self.total += size - self.sizes[index]
        self.messages[index] = message
        self.sizes[index] = size


def _clip_largest(
    room: _Room, cap: int, eligible: Callable[[ChatMessage, Block], bool], floor: int
) -> None:
    """Clip eligible blocks down to one common head length, the longest first.

    The head length is the largest that brings the room under the cap, never below ``floor``.
    """
    # (message index, block index, base length, prior clipped count, current length)
    candidates: list[tuple[int, int, int, int, int]] = []
    for mi, message in enumerate(room.messages):
        for bi, block in enumerate(message.content):
            if not eligible(message, block):
                continue
            if isinstance(block, TextBlock):
                text = block.text
            elif isinstance(block, ToolResult):
                text = block.content
            else:
                continue
            if len(text) <= floor:
                continue
            base, prior = _split_clip(text)
            candidates.append((mi, bi, len(base), prior, len(text)))
    if not candidates:
        return

    def saving(keep: int) -> int:
        total = 0
        for _, _, base_len, prior, cur in candidates:
            if base_len > keep:
                new = keep + len(clip_marker(prior + base_len - keep))
                if new < cur:
                    total += cur - new
        return total

    excess = room.total - cap
    low, high = floor, max(c[2] for c in candidates)
    if saving(low) < excess:
        keep = low
    else:
        # Largest head that still saves enough; saving() falls as the head grows.
        while low < high:
            mid = (low + high + 1) // 2
            if saving(mid) >= excess:
                low = mid
            else:
                high = mid - 1
        keep = low

    changed: dict[int, list[Block]] = {}
    for mi, bi, base_len, prior, cur in candidates:
        if base_len <= keep or keep + len(clip_marker(prior + base_len - keep)) >= cur:
            continue
        blocks = changed.setdefault(mi, list(room.messages[mi].content))
        block = blocks[bi]
        if isinstance(block, TextBlock):
            blocks[bi] = TextBlock(_clip_to(block.text, keep))
        elif isinstance(block, ToolResult):
            blocks[bi] = ToolResult(
                call_id=block.call_id,
                content=_clip_to(block.content, keep),
                is_error=block.is_error,
            )
    for mi, blocks in changed.items():
        room.replace(mi, ChatMessage(role=room.messages[mi].role, content=tuple(blocks)))


def _has_result(message: ChatMessage) -> bool:
    return any(isinstance(b, ToolResult) for b in message.content)


def _drop_oldest(room: _Room, cap: int) -> None:
    """Drop the fewest oldest messages that fit, never separating a call from its result.

    A cut may only start at an assistant message or at a user message holding no tool
    results; the omitted-turns marker takes the first user slot so alternation holds.
    """
    messages, sizes = room.messages, room.sizes
    n = len(messages)
    prior = 0
    first_is_marker = False
    if messages and messages[0].content and isinstance(messages[0].content[0], TextBlock):
        match = _OMITTED_RE.fullmatch(messages[0].content[0].text)
        if match is not None:
            prior = int(match.group(1))
            first_is_marker = len(messages[0].content) == 1
    suffix = [0] * (n + 1)
    for j in range(n - 1, -1, -1):
        suffix[j] = suffix[j + 1] + sizes[j]
    system = len(room.system)
    cut = -1
    for k in range(1, n):
        message = messages[k]
        if message.role == "user" and _has_result(message):
            continue
        cut = k
        dropped = prior + k - (1 if first_is_marker else 0)
        if system + suffix[k] + len(omitted_marker(dropped)) <= cap:
            break
    if cut < 1:
        return
    dropped = prior + cut - (1 if first_is_marker else 0)
    marker = TextBlock(omitted_marker(dropped))
    first = messages[cut]
    if first.role == "assistant":
        kept = [ChatMessage(role="user", content=(marker,)), *messages[cut:]]
    else:
        kept = [ChatMessage(role="user", content=(marker, *first.content)), *messages[cut + 1 :]]
    room.messages = kept
    room.sizes = [message_chars(m) for m in kept]
    room.total = system + sum(room.sizes)


def _references_for_attachments(room: _Room) -> None:
    for mi, message in enumerate(room.messages):
        if not any(
            isinstance(b, ArtifactRef) and b.kind.lower() in INLINE_KINDS for b in message.content
        ):
            continue
        blocks = tuple(
            TextBlock(render_ref(b))
            if isinstance(b, ArtifactRef) and b.kind.lower() in INLINE_KINDS
            else b
            for b in message.content
        )
        room.replace(mi, ChatMessage(role=message.role, content=blocks))


def _own_result(message: ChatMessage, block: Block) -> bool:
    return message.role == "user" and isinstance(block, ToolResult)


def _text(message: ChatMessage, block: Block) -> bool:
    return isinstance(block, TextBlock | ToolResult)


def bound(projection: Projection, cap_chars: int) -> Projection | RoomTooLarge:
    """Return ``projection`` within ``cap_chars``, or the named refusal.

    Order: the agent's own tool results clipped; the oldest messages dropped whole; pictures
    and documents turned into one-line references; long text clipped, the largest first.
    """
    messages = list(projection.messages)
    sizes = [message_chars(m) for m in messages]
    total = len(projection.system) + sum(sizes)
    if total <= cap_chars:
        return projection
    if len(projection.system) > cap_chars:
        return RoomTooLarge(
            needed_chars=len(projection.system),
            cap_chars=cap_chars,
            reason="the system text alone is larger than the cap",
            original_chars=total,
        )
    room = _Room(system=projection.system, messages=messages, sizes=sizes, total=total)
    _clip_largest(room, cap_chars, _own_result, RESULT_HEAD_MIN)
    if room.total > cap_chars:
        _drop_oldest(room, cap_chars)
    if room.total > cap_chars:
        _references_for_attachments(room)
    if room.total > cap_chars:
        _clip_largest(room, cap_chars, _text, TEXT_HEAD_MIN)
    if room.total > cap_chars:
        return RoomTooLarge(
            needed_chars=room.total,
            cap_chars=cap_chars,
            reason=(
                "after clipping tool results, dropping the oldest turns, referencing pictures "
                "and documents and clipping long text, the room still exceeds the cap"
            ),
            original_chars=total,
        )
    return Projection(system=room.system, messages=tuple(room.messages))


# --- the turns bounding can keep --------------------------------------------------------------

# The fewest characters bounding leaves of a block before it drops the oldest turns, whoever
# the projection is for: ``bound`` clips only an agent's own tool results by then, each to a
# head of at least RESULT_HEAD_MIN; ``bound_for_synthesis`` first makes every block larger
# than a quarter of the cap a head of at most OVERSIZED_HEAD characters (possibly none) and a
# marker at least this long.
LEAST_BLOCK_CHARS = len(" [oversized: 0 chars not carried]")


def least_chars(turn: Turn, cap_chars: int) -> int:
    """The fewest characters ``turn`` can take in a projection bounded to ``cap_chars`` that
    keeps it (kept with the turn, which a process keeps from step to step). None for a turn
    some projection leaves out whole: an activity line (never shown) and a member's answer to
    an ask (the asker reads it in its own call's result)."""
    if turn.kind == "activity" or turn.reply_to_call_id:
        return 0
    key = (_LEAST, cap_chars)
    least = turn.rendered.get(key)
    if least is None:
        least = turn.rendered[key] = sum(_least_block_chars(b, cap_chars) for b in turn.content)
    return least


def _least_block_chars(block: Block, cap_chars: int) -> int:
    chars = block_chars(block)
    if chars > cap_chars // 4:
        return min(chars, LEAST_BLOCK_CHARS)
    return min(chars, RESULT_HEAD_MIN) if isinstance(block, ToolResult) else chars


_LEAST = "least_chars"


def keepable_from(turns: Sequence[Turn], cap_chars: int) -> int:
    """How many of the oldest of ``turns`` (in seq order) no projection of them bounded to
    ``cap_chars`` can keep — ``bound`` or ``bound_for_synthesis``, for any agent: bounding
    drops the oldest turns whole until the room fits, so a turn older than newer ones whose
    least sizes (``least_chars``) already pass the cap is always dropped. So that leaving them
    out before the projection changes nothing that matters, the turns kept start no later than
    the last owner turn (the request being answered, with its asks) and hold the call of every
    tool result they hold."""
    total, start, asked, unpaired = 0, len(turns), False, set()
    while start > 0 and not (total > cap_chars and asked and not unpaired):
        start -= 1
        turn = turns[start]
        total += least_chars(turn, cap_chars)
        asked = asked or turn.speaker_kind == "owner"
        for block in reversed(turn.content):
            if isinstance(block, ToolResult):
                unpaired.add((turn.speaker_agent_id, block.call_id))
            elif isinstance(block, ToolCall):
                unpaired.discard((turn.speaker_agent_id, block.id))
    return start


def with_omitted_turns(projection: Projection, count: int) -> Projection:
    """``projection`` of a transcript whose ``count`` oldest turns were left out
    (``keepable_from``): the omitted-turns marker first, where dropping them would have put
    it, so that ``bound`` counts on from it."""
    messages = list(projection.messages)
    marker = TextBlock(omitted_marker(count))
    first = messages[0] if messages else None
    if first is None or first.role == "assistant":
        messages.insert(0, ChatMessage(role="user", content=(marker,)))
    elif first.content == (TextBlock(CONVERSATION_START),):
        messages[0] = ChatMessage(role="user", content=(marker,))
    else:
        messages[0] = ChatMessage(role="user", content=(marker, *first.content))
    return Projection(system=projection.system, messages=tuple(messages))


# --- synthesis ------------------------------------------------------------------------------


def _oversized_text(text: str) -> str:
    base, prior = _split_clip(text)
    head = (base[:OVERSIZED_HEAD].splitlines() or [""])[0]
    return f"{head} [oversized: {prior + len(base) - len(head)} chars not carried]"


def _reference_if_oversized(block: Block, limit: int) -> Block:
    if block_chars(block) <= limit:
        return block
    if isinstance(block, TextBlock):
        if _OVERSIZED_RE.search(block.text):
            return block
        return TextBlock(_oversized_text(block.text))
    if isinstance(block, ToolResult):
        if _OVERSIZED_RE.search(block.content):
            return block
        return ToolResult(
            call_id=block.call_id, content=_oversized_text(block.content), is_error=block.is_error
        )
    if isinstance(block, ToolCall):
        if set(block.arguments) == {_OVERSIZED_ARGS_KEY}:
            return block
        size = block_chars(block) - len(block.name)
        return ToolCall(
            id=block.id,
            name=block.name,
            arguments={_OVERSIZED_ARGS_KEY: f"[oversized: {size} chars not carried]"},
        )
    return TextBlock(
        f"[{block.kind}: title not carried] (artifact {block.artifact_id})"
        f" [oversized: {len(block.title)} chars not carried]"
    )


def bound_for_synthesis(projection: Projection, cap_chars: int) -> Projection | RoomTooLarge:
    """Like bound(), after replacing every block larger than a quarter of the cap by a marker.

    The coordinator's conclusion must never hit the overflow a member's output caused.
    """
    limit = cap_chars // 4
    messages: list[ChatMessage] = []
    changed = False
    for message in projection.messages:
        blocks = tuple(_reference_if_oversized(b, limit) for b in message.content)
        if any(a is not b for a, b in zip(blocks, message.content, strict=True)):
            changed = True
            message = ChatMessage(role=message.role, content=blocks)
        messages.append(message)
    if changed:
        projection = Projection(system=projection.system, messages=tuple(messages))
    return bound(projection, cap_chars)
