"""The run context, goal and run services, and the driver that holds a run's context."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings

from garden.models import Goal, Run
from garden.runtime import (
    RunContext,
    context_from_env,
    context_to_env,
    current_run_context,
    run_context,
)
from garden.services.runs import goal_conclude, goal_create, run_finish, run_start
from operator_messages.driver import ActiveRun, run_goal

CTX = RunContext(
    goal_id=7,
    run_id="abc123",
    goal_kind="tend",
    actor="gardener",
    origin={"kind": "conversation", "conversation_id": 3},
    group_id=4,
)


def test_run_context_is_set_for_its_block_only():
    assert current_run_context() is None
    with run_context(CTX):
        assert current_run_context() == CTX
    assert current_run_context() is None


def test_context_round_trips_through_the_environment():
    env = context_to_env(CTX)
    assert env["GARDEN_GOAL_ORIGIN"] == '{"kind": "conversation", "conversation_id": 3}'
    assert context_from_env(env) == CTX


def test_current_context_falls_back_to_the_environment(monkeypatch):
    for name, value in context_to_env(CTX).items():
        monkeypatch.setenv(name, value)
    assert current_run_context() == CTX
    other = RunContext(goal_id=8, run_id="def", goal_kind="durable", actor="gardener", origin=None)
    with run_context(other):
        assert current_run_context() == other


def test_a_subprocess_sees_the_context_it_is_given():
    code = (
        "from garden.runtime import current_run_context as c; "
        "x = c(); print(x.goal_id, x.run_id, x.goal_kind, x.actor, x.origin)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **context_to_env(CTX)}
    out = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        env=env,
        cwd=django_settings.BASE_DIR,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "7 abc123 tend gardener {'kind': 'conversation', 'conversation_id': 3}"


def test_incomplete_environment_is_no_context():
    env = context_to_env(CTX)
    assert context_from_env({k: v for k, v in env.items() if k != "GARDEN_RUN_ID"}) is None
    assert context_from_env({**env, "GARDEN_GOAL_ID": "seven"}) is None


def test_an_origin_that_is_not_json_is_kept_raw_not_read_as_no_origin():
    ctx = context_from_env({**context_to_env(CTX), "GARDEN_GOAL_ORIGIN": "{not json"})
    assert ctx is not None and ctx.origin == "{not json"


@pytest.mark.django_db
def test_run_start_creates_the_run_directory(runtime):
    goal = goal_create(kind="tend")
    run = run_start(goal=goal, actor="gardener")
    assert len(run.run_id) == 32 and int(run.run_id, 16) >= 0
    assert (runtime / "runs" / run.run_id).is_dir()
    assert run.directory == str(runtime / "runs" / run.run_id)
    assert run.status == Run.Status.RUNNING and goal.owner is None


@pytest.mark.django_db
def test_run_finishes_once_and_goal_concludes_once(runtime):
    goal = goal_create(kind="durable", title="Keep the books")
    run = run_start(goal=goal, actor="gardener")
    assert run_finish(run=run, status="succeeded", outcome={"n": 1})
    assert not run_finish(run=run, status="failed", outcome={})
    run.refresh_from_db()
    assert (run.status, run.outcome) == ("succeeded", {"n": 1}) and run.finished_at
    assert goal_conclude(goal=goal, status="concluded")
    assert not goal_conclude(goal=goal, status="failed")
    goal.refresh_from_db()
    assert goal.status == "concluded" and goal.concluded_at


@pytest.mark.django_db
def test_services_refuse_unknown_values(runtime):
    with pytest.raises(ValueError):
        goal_create(kind="chores")
    goal = goal_create(kind="tend")
    run = run_start(goal=goal, actor="gardener")
    with pytest.raises(ValueError):
        run_finish(run=run, status="running")
    with pytest.raises(ValueError):
        goal_conclude(goal=goal, status="open")


@pytest.mark.django_db
def test_run_goal_holds_the_context_while_the_work_runs(runtime):
    goal = goal_create(kind="durable", origin=None)
    seen: list[RunContext | None] = []

    def work(active: ActiveRun) -> dict:
        seen.append(current_run_context())
        assert active.env["GARDEN_RUN_ID"] == active.run.run_id
        return {"did": "work"}

    result = run_goal(goal, "gardener", work)
    assert seen == [
        RunContext(
            goal_id=goal.pk,
            run_id=result.run.run_id,
            goal_kind="durable",
            actor="gardener",
            origin=None,
        )
    ]
    assert current_run_context() is None
    run = Run.objects.get(pk=result.run.pk)
    assert (run.status, run.outcome) == ("succeeded", {"did": "work"})
    assert result.tend_finished is None  # only tend runs report a tend-finished event


@pytest.mark.django_db
def test_run_goal_fails_the_run_and_reraises(runtime):
    goal = goal_create(kind=Goal.Kind.MISSION)

    def work(active: ActiveRun) -> None:
        raise RuntimeError("the model went away")

    with pytest.raises(RuntimeError, match="went away"):
        run_goal(goal, "gardener", work)
    run = Run.objects.get(goal=goal)
    assert run.status == "failed" and "the model went away" in run.outcome["error"]
    assert current_run_context() is None
