"""An export written out, a chunk at a time: JSON (schema/conversation-export.schema.json) and
Markdown for a person to read. Pure: it takes the records and yields text."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from groups.export.records import (
    EXPORT_VERSION,
    ApprovalRecord,
    ArtifactRecord,
    ConversationRecord,
    ExportRecord,
    RequestRecord,
    Speaker,
    TurnRecord,
)

FORMAT_NAME = "garden.conversation-export"
# Markdown shows a tool call's arguments and a result's content on one line, cut to this.
MARKDOWN_SNIPPET = 300


def _time(at: datetime | None) -> str | None:
    return at.isoformat() if at else None


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _opened(head: dict[str, Any]) -> str:
    """``head`` as a JSON object left open for more members."""
    text = _dumps(head)[:-1]
    return text + ", " if head else text


def speaker_json(speaker: Speaker) -> dict[str, Any]:
    agent = (
        {"id": speaker.agent_id, "handle": speaker.handle, "name": speaker.name}
        if speaker.agent_id is not None
        else None
    )
    return {"kind": speaker.kind, "name": speaker.name, "agent": agent}


def turn_json(turn: TurnRecord) -> dict[str, Any]:
    return {
        "id": turn.id,
        "seq": turn.seq,
        "time": _time(turn.at),
        "kind": turn.kind,
        "speaker": speaker_json(turn.speaker),
        "text": turn.text,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.tool_calls
        ],
        "tool_results": [
            {"call_id": r.call_id, "content": r.content, "is_error": r.is_error}
            for r in turn.tool_results
        ],
        "artifacts": [
            {"id": a.artifact_id, "kind": a.kind, "title": a.title} for a in turn.artifacts
        ],
        "request": turn.request_id,
        "addressed_agent": turn.addressed_agent_id,
    }


def request_json(request: RequestRecord) -> dict[str, Any]:
    return {
        "id": request.id,
        "state": request.state,
        "source": request.source,
        "outcome_code": request.outcome_code,
        "outcome": request.outcome,
        "created_at": _time(request.created_at),
        "started_at": _time(request.started_at),
        "finished_at": _time(request.finished_at),
    }


def approval_json(approval: ApprovalRecord) -> dict[str, Any]:
    return {
        "id": approval.id,
        "tool_call_id": approval.tool_call_id,
        "request": approval.request_id,
        "agent": speaker_json(approval.agent),
        "action": {"name": approval.action_name, "arguments": approval.arguments},
        "approved_arguments": approval.approved_arguments,
        "status": approval.status,
        "decided_by": approval.decided_by,
        "surface": approval.surface,
        "reason": approval.reason,
        "created_at": _time(approval.created_at),
        "decided_at": _time(approval.decided_at),
        "executed_at": _time(approval.executed_at),
    }


def artifact_json(artifact: ArtifactRecord) -> dict[str, Any]:
    return {
        "id": artifact.id,
        "kind": artifact.kind,
        "title": artifact.title,
        "mime_type": artifact.mime_type,
        "size": artifact.size,
        "conversation": artifact.conversation_id,
        "agent": artifact.agent_id,
        "created_at": _time(artifact.created_at),
    }


def _conversation_head(conversation: ConversationRecord) -> dict[str, Any]:
    return {
        "id": conversation.id,
        "title": conversation.title,
        "status": conversation.status,
        "created_at": _time(conversation.created_at),
        "closed_at": _time(conversation.closed_at),
        "carried_summary": conversation.carried_summary,
    }


def json_chunks(export: ExportRecord) -> Iterator[str]:
    """The export as one JSON document, written a turn at a time."""
    head = {
        "format": FORMAT_NAME,
        "version": EXPORT_VERSION,
        "exported_at": _time(export.exported_at),
        "scope": export.scope,
        "title": export.title,
        "owner": export.owner,
        "group": export.group_id,
        "agent": speaker_json(export.agent) if export.agent else None,
        "members": [speaker_json(m) for m in export.members],
    }
    yield _opened(head) + '"conversations": ['
    for i, conversation in enumerate(export.conversations):
        yield ("," if i else "") + _opened(_conversation_head(conversation)) + '"turns": ['
        for j, turn in enumerate(conversation.turns):
            yield ("," if j else "") + _dumps(turn_json(turn))
        requests = [request_json(r) for r in conversation.requests]
        approvals = [approval_json(a) for a in conversation.approvals]
        yield f'], "requests": {_dumps(requests)}, "approvals": {_dumps(approvals)}}}'
    artifacts = [artifact_json(a) for a in export.artifacts()]
    yield f'], "artifacts": {_dumps(artifacts)}}}\n'


# --- Markdown ---------------------------------------------------------------------------------


def _when(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC") if at else "—"


def _snippet(text: str) -> str:
    """``text`` on one line, cut to MARKDOWN_SNIPPET characters."""
    line = " ".join(text.split())
    return line if len(line) <= MARKDOWN_SNIPPET else line[: MARKDOWN_SNIPPET - 1] + "…"


def _code(text: str) -> str:
    """``text`` as an inline code span that no backtick inside it can close."""
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _fences_closed(text: str) -> str:
    """``text`` with a code fence it leaves open closed, so that it cannot swallow the turns
    after it."""
    opened: str | None = None
    for line in text.splitlines():
        found = _FENCE.match(line)
        if not found:
            continue
        fence = found.group(1)
        if opened is None:
            opened = fence
        elif fence[0] == opened[0] and len(fence) >= len(opened) and not line.strip(" `~"):
            opened = None
    return text if opened is None else f"{text}\n{opened}"


def _who(speaker: Speaker) -> str:
    return f"**{speaker.name}** (@{speaker.handle})" if speaker.handle else f"**{speaker.name}**"


def _decision(approval: ApprovalRecord) -> str:
    if approval.status == "pending":
        return "approval pending"
    by = f" by {approval.decided_by}" if approval.decided_by else ""
    on = f" on {approval.surface}" if approval.surface else ""
    words = f"{approval.status}{by}{on}, {_when(approval.decided_at)}"
    if approval.approved_arguments is not None:
        words += f", with changes {_code(_snippet(_dumps(approval.approved_arguments)))}"
    if approval.reason:
        words += f" — {_snippet(approval.reason)}"
    return words


def _turn_markdown(
    turn: TurnRecord, approvals: dict[str, ApprovalRecord], calls: dict[str, str]
) -> str:
    """One turn under its speaker's name; ``calls`` (a call's id to its tool's name, of the
    thread so far) names the tool a result answers."""
    label = "" if turn.kind == "turn" else f" · {turn.kind}"
    lines = [f"{_who(turn.speaker)} · {_when(turn.at)} · #{turn.seq}{label}", ""]
    if turn.text:
        lines += [_fences_closed(turn.text), ""]
    items = []
    for call in turn.tool_calls:
        calls[call.id] = call.name
        item = f"- Tool call {_code(call.name)} {_code(_snippet(_dumps(call.arguments)))}"
        approval = approvals.get(call.id)
        if approval is not None:
            item += f" — {_decision(approval)}"
        items.append(item)
    for result in turn.tool_results:
        failed = " (error)" if result.is_error else ""
        of = f" of {_code(calls[result.call_id])}" if result.call_id in calls else ""
        items.append(f"- Tool result{of}{failed}: {_snippet(result.content) or '(empty)'}")
    for ref in turn.artifacts:
        items.append(f"- Artifact {ref.artifact_id}: {ref.kind} “{_snippet(ref.title)}”")
    if items:
        lines += [*items, ""]
    return "\n".join(lines) + "\n"


def _conversation_markdown_head(conversation: ConversationRecord) -> str:
    title = conversation.title or f"Conversation {conversation.id}"
    lines = [
        f"## {title}",
        "",
        f"Conversation {conversation.id} · {conversation.status} · started "
        f"{_when(conversation.created_at)}"
        + (f" · closed {_when(conversation.closed_at)}" if conversation.closed_at else ""),
        "",
    ]
    if conversation.carried_summary:
        summary = "\n".join(f"> {line}" for line in conversation.carried_summary.splitlines())
        lines += ["Carried over from the thread before:", "", summary, ""]
    return "\n".join(lines) + "\n"


def _conversation_markdown_tail(
    conversation: ConversationRecord, unshown: list[ApprovalRecord]
) -> str:
    """The thread's requests, and the approvals no turn of it showed beside their call."""
    lines: list[str] = []
    if conversation.requests:
        lines += ["### Requests", ""]
        for request in conversation.requests:
            outcome = f" — {_snippet(request.outcome)}" if request.outcome else ""
            code = f" ({request.outcome_code})" if request.outcome_code else ""
            lines.append(
                f"- Request {request.id} · {request.source} · {request.state}{code}, "
                f"{_when(request.created_at)}{outcome}"
            )
        lines.append("")
    if unshown:
        lines += ["### Approvals", ""]
        for approval in unshown:
            lines.append(
                f"- {approval.agent.name} asked to run {_code(approval.action_name)} "
                f"{_code(_snippet(_dumps(approval.arguments)))} — {_decision(approval)}"
            )
        lines.append("")
    return "\n".join(lines) + ("\n" if lines else "")


def markdown_chunks(export: ExportRecord) -> Iterator[str]:
    """The export for a person to read: each thread's turns under its speakers' names, tool
    calls and results a line each, an approval's decision beside its call."""
    members = ", ".join(f"{m.name} (@{m.handle})" if m.handle else m.name for m in export.members)
    head = [
        f"# {export.title}",
        "",
        f"Exported from garden {_when(export.exported_at)} for {export.owner}.",
    ]
    if members:
        head.append(f"Members: {members}.")
    yield "\n".join(head) + "\n\n"
    empty = True
    for conversation in export.conversations:
        empty = False
        yield _conversation_markdown_head(conversation)
        by_call = {a.tool_call_id: a for a in conversation.approvals}
        calls: dict[str, str] = {}
        for turn in conversation.turns:
            yield _turn_markdown(turn, by_call, calls)
        unshown = [a for a in conversation.approvals if a.tool_call_id not in calls]
        yield _conversation_markdown_tail(conversation, unshown)
    if empty:
        yield "No conversations.\n\n"
    artifacts = list(export.artifacts())
    if artifacts:
        yield "## Artifacts\n\nListed, not included.\n\n"
        for artifact in artifacts:
            yield (
                f"- Artifact {artifact.id}: {artifact.kind} “{_snippet(artifact.title)}” "
                f"({artifact.mime_type}, {artifact.size:,} bytes)\n"
            )
        yield "\n"
