"""How a turn reads as room context: attributed user-side text that never passes for the
owner's words or for an instruction, tool calls and results told in one line each, artifacts
as one-line references; and what a block measures, for bounding."""

from __future__ import annotations

import json
from typing import Any

from garden.providers.types import ArtifactRef, Block, ChatMessage, TextBlock, ToolCall, ToolResult
from groups.domain.turns import Turn

# Continuation lines of attributed text are indented: adapters join a message's text blocks
# with newlines, and an unindented line must never pass for the owner's words.
CONTINUATION = "\n  "


def indented(text: str) -> str:
    """``text`` with every line after the first indented. A line ends wherever
    ``str.splitlines`` ends one (``\r``, ``\v``, ``\f``, U+001C-U+001E, U+0085, U+2028 and
    U+2029 as well as ``\n``), since a model or a reader may break a line at any of them;
    each break becomes ``\n`` and two spaces."""
    lines = text.splitlines()
    joined = CONTINUATION.join(lines)
    if lines and text.splitlines(keepends=True)[-1] != lines[-1]:
        joined += CONTINUATION  # the text ended with a line break
    return joined


def compact_json(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False, default=str)


def render_ref(ref: ArtifactRef) -> str:
    """The one line that stands for an artifact; its contents never travel."""
    return f"[{ref.kind}: {ref.title}] (artifact {ref.artifact_id})"


def block_chars(block: Block) -> int:
    if isinstance(block, TextBlock):
        return len(block.text)
    if isinstance(block, ToolResult):
        return len(block.content)
    if isinstance(block, ToolCall):
        return len(block.name) + len(compact_json(block.arguments))
    return len(render_ref(block))


def message_chars(message: ChatMessage) -> int:
    return sum(block_chars(b) for b in message.content)


def speaker_label(turn: Turn, handles: dict[int, str]) -> str:
    """How the room names the speaker of ``turn``: the owner, garden, or an @handle."""
    if turn.speaker_kind == "owner":
        return "the owner"
    if turn.speaker_kind == "garden":
        return "garden"
    handle = turn.speaker_handle or handles.get(turn.speaker_agent_id or -1)
    return f"@{handle}" if handle else f"@agent-{turn.speaker_agent_id}"


# Tool names by (speaker agent id, call id): some providers reuse ids such as "call_0" in
# every response, so the latest call of that speaker names the result that follows it.
ToolNames = dict[tuple[int | None, str], str]


def person_prefix(turn: Turn) -> str:
    """How a person's turn starts in a room several people speak in: their username, marked
    as a person's (a username has no spaces or brackets, so no text can imitate it)."""
    return f"{turn.speaker_person or 'the owner'} (person): "


def room_blocks(
    turn: Turn, handles: dict[int, str], tool_names: ToolNames, *, people: bool = False
) -> list[Block]:
    """Render a turn as attributed user-side blocks, noting the names of its tool calls;
    with ``people`` (more than one person has spoken), each person's text is attributed."""
    label = speaker_label(turn, handles)
    owner = turn.speaker_kind == "owner"
    kind = turn.kind
    if kind == "summary":
        prefix = "Summary of the previous discussion: "
    elif kind == "import":
        prefix = "[imported note] "
    elif kind == "notice":
        prefix = "[notice] " if turn.speaker_kind == "garden" else f"[notice from {label}] "
    elif kind == "coordination" and turn.addressed_agent_id is not None:
        addressed = handles.get(turn.addressed_agent_id, f"agent-{turn.addressed_agent_id}")
        prefix = f"{label} said to @{addressed}: "
    elif owner and people:
        prefix = person_prefix(turn)
    elif owner:
        # The owner is the one unprefixed voice; the system framing says so.
        prefix = ""
    else:
        prefix = f"{label} said: "
    out: list[Block] = []
    for block in turn.content:
        if isinstance(block, TextBlock):
            out.append(block if owner and not prefix else TextBlock(prefix + indented(block.text)))
        elif isinstance(block, ToolCall):
            tool_names[(turn.speaker_agent_id, block.id)] = block.name
            # JSON leaves U+0085, U+2028 and U+2029 unescaped: they break lines too.
            line = f"{label} used tool {block.name} {compact_json(block.arguments)}"
            out.append(TextBlock(indented(line)))
        elif isinstance(block, ToolResult):
            name = tool_names.get((turn.speaker_agent_id, block.call_id), f"call {block.call_id}")
            error = ", error" if block.is_error else ""
            out.append(
                TextBlock(indented(f"{label}'s tool result ({name}{error}): {block.content}"))
            )
        elif owner and kind == "turn":
            # The owner's own pictures and documents stay reference blocks for the adapter.
            out.append(block)
        else:
            out.append(TextBlock(indented(f"{label} shared {render_ref(block)}")))
    return out


def rendered_blocks(
    turn: Turn, handles: dict[int, str], key: tuple, tool_names: ToolNames, *, people: bool = False
) -> list[Block]:
    """``room_blocks`` of ``turn``, kept on the turn for the same handles when it holds no
    tool result (the one block whose rendering depends on the turns before it); the names
    of its tool calls are noted either way."""
    key = (key, people)
    kept = turn.rendered.get(key)
    if kept is not None:
        for block in turn.content:
            if isinstance(block, ToolCall):
                tool_names[(turn.speaker_agent_id, block.id)] = block.name
        return kept
    blocks = room_blocks(turn, handles, tool_names, people=people)
    if not any(isinstance(b, ToolResult) for b in turn.content):
        turn.rendered[key] = blocks
    return blocks
