"""Helpers for operator-message tests: goals and runs in context, and a snapshot of writes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from garden.models import Goal, Message, Run
from garden.runtime import RunContext, run_context
from garden.services.runs import goal_create, run_start
from tests.support.fixtures import GARDEN

# Two valid records, one per routing row, for the validator tests.
RUN_ID = "a" * 32
NOTE = {
    "schema_version": 1,
    "kind": "tend_survey",
    "sender": "garden",
    "transcript_policy": "none",
    "delivery_policy": "out_of_band_note",
    "emitted_at": "2026-03-29T10:15:00.123456+00:00",
    "source_goal_id": 5,
    "source_run_id": RUN_ID,
    "delivery_path": f"inbox/{GARDEN}/notes/20260329T101500.123456Z-tend_survey-1a2b3c4d.md",
}
REPLY = {
    **{k: v for k, v in NOTE.items() if k != "delivery_path"},
    "kind": "recently_concluded",
    "transcript_policy": "canonical",
    "delivery_policy": "reply_copy",
    "origin": {"kind": "conversation", "conversation_id": 3},
    "conversation_message_id": 41,
    "delivery_path": f"inbox/{GARDEN}/20260329T101500.123456Z-recently_concluded-9f8e7d6c.md",
}


def start(
    kind: str, *, origin: Any = None, actor: str = "gardener", owner: Any = None
) -> tuple[Goal, Run, RunContext]:
    """A goal, one started run of it, and the context the driver would set for it."""
    goal = goal_create(kind=kind, owner=owner, origin=origin)
    run = run_start(goal=goal, actor=actor)
    ctx = RunContext(
        goal_id=goal.pk,
        run_id=run.run_id,
        goal_kind=kind,
        actor=actor,
        origin=origin,
        owner_id=goal.owner_id,
    )
    return goal, run, ctx


@contextmanager
def in_run(kind: str, **kw: Any) -> Iterator[tuple[Goal, Run, RunContext]]:
    goal, run, ctx = start(kind, **kw)
    with run_context(ctx):
        yield goal, run, ctx


def snapshot(root: Path) -> dict[str, Any]:
    """Every file under the runtime root with a hash of its bytes, and every message row."""
    files = {}
    if root.exists():
        for path in sorted(root.rglob("*")):
            if path.is_file():
                files[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    messages = list(Message.objects.order_by("pk").values_list("pk", "conversation_id", "seq"))
    return {"files": files, "messages": messages}
