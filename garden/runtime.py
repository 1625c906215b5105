"""The trusted run context: which goal and run the current code works for, and as whom.

Set by the driver for the duration of a run, in-process through a context variable and for
subprocesses through environment variables; model-supplied ids never reach it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

ENV_GOAL_ID = "GARDEN_GOAL_ID"
ENV_RUN_ID = "GARDEN_RUN_ID"
ENV_GOAL_KIND = "GARDEN_GOAL_KIND"
ENV_RUN_ACTOR = "GARDEN_RUN_ACTOR"
ENV_GOAL_ORIGIN = "GARDEN_GOAL_ORIGIN"
ENV_GROUP_ID = "GARDEN_GROUP_ID"
ENV_AGENT_ID = "GARDEN_AGENT_ID"
ENV_OWNER_ID = "GARDEN_OWNER_ID"

GARDENER = "gardener"


@dataclass(frozen=True)
class RunContext:
    """Who is running, for which goal and run. ``origin`` is the goal's origin, as stored."""

    goal_id: int
    run_id: str
    goal_kind: str
    actor: str
    origin: Any
    group_id: int | None = None
    agent_id: int | None = None
    owner_id: int | None = None


_current: ContextVar[RunContext | None] = ContextVar("garden_run_context", default=None)


def current_run_context() -> RunContext | None:
    """The context set by ``run_context``, else the one carried in this process's environment."""
    ctx = _current.get()
    if ctx is not None:
        return ctx
    return context_from_env(os.environ)


@contextmanager
def run_context(ctx: RunContext) -> Iterator[RunContext]:
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)


def context_to_env(ctx: RunContext) -> dict[str, str]:
    """The environment a subprocess needs to see ``ctx`` as its current run context."""
    env = {
        ENV_GOAL_ID: str(ctx.goal_id),
        ENV_RUN_ID: ctx.run_id,
        ENV_GOAL_KIND: ctx.goal_kind,
        ENV_RUN_ACTOR: ctx.actor,
        ENV_GOAL_ORIGIN: json.dumps(ctx.origin),
    }
    for name, value in (
        (ENV_GROUP_ID, ctx.group_id),
        (ENV_AGENT_ID, ctx.agent_id),
        (ENV_OWNER_ID, ctx.owner_id),
    ):
        if value is not None:
            env[name] = str(value)
    return env


def context_from_env(environ: Mapping[str, str]) -> RunContext | None:
    """The context carried in ``environ``, or None when any required part is missing or not a
    number where one is needed. An origin that is not JSON is kept as its raw text so that the
    consumer rejects it as a malformed origin rather than mistaking it for "no origin"."""
    try:
        goal_id = int(environ[ENV_GOAL_ID])
        run_id = environ[ENV_RUN_ID]
        goal_kind = environ[ENV_GOAL_KIND]
        actor = environ[ENV_RUN_ACTOR]
        optional = [environ.get(name) for name in (ENV_GROUP_ID, ENV_AGENT_ID, ENV_OWNER_ID)]
        group_id, agent_id, owner_id = (int(v) if v else None for v in optional)
    except (KeyError, ValueError):
        return None
    if not run_id or not goal_kind or not actor:
        return None
    raw_origin = environ.get(ENV_GOAL_ORIGIN, "null")
    try:
        origin = json.loads(raw_origin)
    except ValueError:
        origin = raw_origin
    return RunContext(
        goal_id=goal_id,
        run_id=run_id,
        goal_kind=goal_kind,
        actor=actor,
        origin=origin,
        group_id=group_id,
        agent_id=agent_id,
        owner_id=owner_id,
    )


def runtime_root() -> Path:
    return Path(settings.GARDEN_RUNTIME_ROOT)


def run_directory(run_id: str) -> Path:
    return runtime_root() / "runs" / run_id
