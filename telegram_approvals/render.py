"""What an approval's Telegram message says, and which buttons it carries, for each state it
can be in (pure: plain data in, plain data out). Also the buttons' callback data, both ways."""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

# Telegram's limit on a message is 4096 characters; an approval's stays well inside it.
MAX_TEXT = 3_500
ARGUMENT_CHARS = 120
MAX_ARGUMENTS = 6

SURFACE_WORDS = {
    "telegram": "on Telegram",
    "dashboard": "in the dashboard",
    "api": "through the API",
    "admin": "in the staff admin",
}

_CALLBACK = re.compile(r"^ap:(\d{1,18}):([ar])$")
_DECISIONS = {"a": "approve", "r": "reject"}


@dataclass(frozen=True)
class ApprovalView:
    """The facts of an approval that its message shows."""

    approval_id: int
    label: str  # "Ledger wants to write Savings plan" (groups.payloads.approval_label)
    group: str  # the group's name, or "" once its history was cleared
    arguments: dict[str, Any]
    status: str  # pending | approved | rejected
    surface: str = ""
    reason: str = ""
    executed: bool = False
    by_owner: bool = True
    decider: str = ""
    changed: bool = False  # approved with arguments the person changed (in the room or API)


@dataclass(frozen=True)
class Rendered:
    text: str
    buttons: tuple[tuple[str, str], ...] = ()


def callback_data(approval_id: int, decision: str) -> str:
    return f"ap:{approval_id}:{decision[0]}"


def parse_callback(data: str | None) -> tuple[int, str] | None:
    """``(approval id, "approve" | "reject")`` from a button's data, or None for anything else."""
    match = _CALLBACK.match(data or "")
    if match is None:
        return None
    return int(match.group(1)), _DECISIONS[match.group(2)]


# Control, format (bidi overrides, zero-width) and line or paragraph separator characters.
_UNSHOWN = frozenset({"Cc", "Cf", "Zl", "Zp"})


def plain(text: str) -> str:
    """``text`` as one line of what it says: every string an owner, a server or a model chose
    (a group's or tool's name, an argument, a username, a reason) goes through here, so none
    can start a line that passes for the message's own, or reverse or hide what follows."""
    if text.isascii() and text.isprintable():
        return " ".join(text.split())
    kept = "".join(" " if unicodedata.category(ch) in _UNSHOWN else ch for ch in text)
    return " ".join(kept.split())


def _one_line(value: Any, limit: int) -> tuple[str, bool]:
    """``value`` on one line (see ``plain``), cut to ``limit`` characters; and whether it was
    cut."""
    shown = plain(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    if len(shown) > limit:
        return shown[: limit - 1] + "…", True
    return shown, False


def _argument_lines(arguments: dict[str, Any]) -> tuple[list[str], list[str], int]:
    """The argument lines, the names of the arguments shown only in part, and how many
    arguments are not shown at all."""
    lines, partial = [], []
    for key, value in list(arguments.items())[:MAX_ARGUMENTS]:
        name, name_cut = _one_line(key, 40)
        shown, value_cut = _one_line(value, ARGUMENT_CHARS)
        if name_cut or value_cut:
            partial.append(name)
        lines.append(f"• {name}: {shown}")
    return lines, partial, max(0, len(arguments) - MAX_ARGUMENTS)


def _cut_note(partial: list[str], hidden: int, body_cut: bool, pending: bool) -> str:
    """What the message leaves out, and — while it can be pressed — that Approve runs the
    whole call all the same; "" when it shows everything."""
    parts = []
    if partial:
        parts.append(f"{', '.join(partial)} shown in part")
    if hidden:
        parts.append(f"{hidden} more argument{'s' if hidden > 1 else ''} not shown")
    if body_cut:
        parts.append("the message is cut")
    if not parts:
        return ""
    then = (
        "Approve runs the whole call, every argument as the agent gave it"
        if pending
        else "the whole call is in the dashboard"
    )
    return f"… {'; '.join(parts)}. {then}."


# Changed arguments come from the room or the API: the buttons approve it as asked.
WAITING = "Waiting for your decision. To change it before approving, open the room."


def outcome(view: ApprovalView) -> str:
    """The line that says where the approval stands."""
    if view.status == "pending":
        return WAITING
    who = "you" if view.by_owner else (plain(view.decider) or "someone")
    where = SURFACE_WORDS.get(view.surface, f"on {view.surface}" if view.surface else "")
    by = f"by {who} {where}".rstrip()
    if view.status == "approved":
        if view.reason.startswith("outcome unknown"):
            return (
                f"Approved {by} — the worker running it stopped: whether it ran is unknown, "
                "and it was not run again."
            )
        changed = " with changes" if view.changed else ""
        if view.reason.startswith(("could not run", "failed")):
            return f"Approved{changed} {by}, but it {plain(view.reason).rstrip('.')}."
        return f"Approved{changed} {by} — {'it ran' if view.executed else 'running it now'}."
    if _reason(view.reason):
        return f"Rejected: {_reason(view.reason)}."
    return f"Rejected {by}; it did not run."


def _reason(reason: str) -> str:
    """``request stopped`` (how a finished request words it) as "the request was stopped"."""
    reason = plain(reason).rstrip(".")
    if reason.startswith("request "):
        return f"the request was {reason.removeprefix('request ')}"
    return reason[:1].lower() + reason[1:]


def render(view: ApprovalView) -> Rendered:
    """The message for ``view``: what is asked, the arguments briefly, where it stands, and —
    while pending — the Approve / Reject buttons."""
    head = plain(view.label) + (f" (in {plain(view.group)})" if view.group else "")
    lines, partial, hidden = _argument_lines(view.arguments)
    body = "\n".join([head, *lines])
    said = outcome(view)
    pending = view.status == "pending"
    note = _cut_note(partial, hidden, False, pending)
    longest_note = len(_cut_note(partial, hidden, True, pending))
    room = MAX_TEXT - len(said) - longest_note - 4
    if len(body) > room:
        body = body[: room - 1] + "…"
        note = _cut_note(partial, hidden, True, pending)
    text = f"{body}\n{note}\n\n{said}" if note else f"{body}\n\n{said}"
    if view.status != "pending":
        return Rendered(text)
    return Rendered(
        text,
        (
            ("Approve", callback_data(view.approval_id, "approve")),
            ("Reject", callback_data(view.approval_id, "reject")),
        ),
    )


def already_decided(view: ApprovalView) -> str:
    """A late press's answer: "Already rejected: the request was stopped.", say."""
    said = outcome(view)
    return "Already " + said[0].lower() + said[1:]
