"""The fault harness's driver: fresh groups with one request each, tagged at the fake provider
(their members calling a tool that waits for approval, an MCP server's among them, when asked);
the worker pool and its supervisor; the sweeper; and the liveness and safety checks after each
trial (bench/fault_invariants.py says what they check)."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from bench.fault_invariants import liveness_violations, mcp_record, safety_violations
from bench.fault_mcp import ID_ARGUMENT
from bench.fault_report import Result
from bench.seeding import build_agent_chat, build_group
from bench.workers import socket_owner

PREFIX = "mcp."  # of an MCP tool's name (garden.tools.mcp.PREFIX)
SWEEP_AGE = 3.0  # seconds quiet before the sweeper re-enqueues: > LOCK_TTL > a live step
SWEEP_INTERVAL = 0.5
ASK = "Keep digging."


def db_retry(fn: Callable[[], Any], attempts: int = 20) -> Any:
    """Run a harness query, reconnecting while PostgreSQL is being cut (the pg scenario)."""
    from django.db import InterfaceError, OperationalError, connection

    for attempt in range(attempts):
        try:
            return fn()
        except (OperationalError, InterfaceError):
            connection.close()
            if attempt == attempts - 1:
                raise
            time.sleep(0.2)
    return None


class Harness:
    """Requests on fresh groups (one request per group, each group tagged at the provider) or,
    with ``one_to_one``, on fresh agents' 1:1 conversations; worker processes, the sweeper,
    and the invariant checks."""

    def __init__(
        self,
        *,
        provider_url: str,
        spawn: Callable[..., Any],
        concurrency: int = 4,
        sweep_age: float = SWEEP_AGE,
        log: Callable[[str], None] = print,
    ) -> None:
        from bench.fake_provider import FakeProviderClient

        self.client = FakeProviderClient(provider_url)
        self.provider_port = urlsplit(provider_url).port
        self.spawn_fn = spawn
        self.concurrency = concurrency
        self.sweep_age = sweep_age
        self.log = log
        self.tags: dict[int, str] = {}
        self.workers: list[Any] = []
        self.run_id = uuid.uuid4().hex[:6]
        self._n = itertools.count(1)
        self._names = itertools.count(1)
        self._sweep_stop = threading.Event()
        self._sweeper: threading.Thread | None = None
        self.sweep_errors = 0
        self._untooled = 0
        # New requests are messages to one agent (its 1:1 conversation) rather than groups'.
        self.one_to_one = False
        # The MCP server (bench/fault_mcp.py Tracker) whose tool members call, when one runs.
        self.mcp: Any = None

    # workers

    def spawn(
        self, name: str = "w", env: dict[str, str] | None = None, loglevel: str = "warning"
    ) -> Any:
        worker = self.spawn_fn(
            name=f"{name}{next(self._names)}-{self.run_id}",
            env=env or {},
            concurrency=self.concurrency,
            loglevel=loglevel,
        )
        self.workers.append(worker)
        return worker

    def stop_workers(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers.clear()

    def supervise(self, pool: list[Any], name: str) -> int:
        """Replace the workers of ``pool`` that exited, as a process supervisor would (compose
        ``restart:``, systemd ``Restart=``). Returns how many it replaced."""
        replaced = 0
        for i, worker in enumerate(pool):
            if not worker.alive:
                self.workers.remove(worker)
                pool[i] = self.spawn(name)
                replaced += 1
        return replaced

    def retire(self, pool: list[Any]) -> None:
        """Stop the workers of ``pool``, done with their scenario."""
        for worker in pool:
            worker.stop()
            self.workers.remove(worker)

    # the sweeper

    def start_sweeper(self) -> None:
        self._sweep_stop.clear()
        self._sweeper = threading.Thread(target=self._sweep_loop, daemon=True, name="sweeper")
        self._sweeper.start()

    def stop_sweeper(self) -> None:
        self._sweep_stop.set()
        if self._sweeper:
            self._sweeper.join(10)

    def _sweep_loop(self) -> None:
        from django.db import connection

        from groups.services.approvals import sweep_stranded

        while not self._sweep_stop.wait(SWEEP_INTERVAL):
            try:
                sweep_stranded(older_than_seconds=self.sweep_age)
            except Exception:  # Redis or PostgreSQL is being cut: next round
                self.sweep_errors += 1
                connection.close()
        connection.close()

    # requests

    def new_requests(
        self,
        n: int,
        *,
        latency: float,
        timeout: float = 10.0,
        action: str = "",
        **faults: float,
    ) -> list[int]:
        """``n`` fresh groups, one request each; ``faults`` are fake-provider options for them.
        With ``action`` the member calls that tool each time before it answers, and each call
        waits for a person's approval: ``file.write`` (a document under a title of its own,
        the tool listed for approval) or an MCP tool of ``self.mcp`` (a record id of its own;
        destructive, so it waits by its annotations). With ``one_to_one`` set on the harness,
        each request is a message to one agent in its 1:1 conversation instead, the agent
        calling a tool (memory.recall, or ``action``) before it answers."""
        from groups.services.requests import request_create

        ids = []
        mcp = action.startswith(PREFIX)
        member_tool: dict[str, str] = {}
        if action or self.one_to_one:
            member_tool["member_tool"] = (action or "memory.recall").replace(".", "__")
        if mcp:
            member_tool["member_tool_id_arg"] = ID_ARGUMENT
        for _ in range(n):
            tag = f"{self.run_id}-{next(self._n)}"
            self.client.configure(tags={tag: {"latency": latency, **member_tool, **faults}})
            if self.one_to_one:
                request_id = db_retry(
                    lambda tag=tag: self._one_to_one_request(tag, timeout, action)
                )
                self.tags[request_id] = tag
                ids.append(request_id)
                continue
            group = db_retry(
                lambda tag=tag: build_group(
                    username=f"faults-{tag}",
                    base_url=self.client.base_url(tag),
                    timeout=timeout,
                    approval_tools=(action,) if action and not mcp else (),
                    mcp_tools=(action,) if mcp else (),
                    mcp_url=self.mcp.url if mcp else "",
                )
            )
            request = db_retry(
                lambda group=group, tag=tag: request_create(group=group, text=f"{ASK} [{tag}]")
            )
            self.tags[request.pk] = tag
            ids.append(request.pk)
        return ids

    def _one_to_one_request(self, tag: str, timeout: float, action: str) -> int:
        from groups.services.requests import conversation_request_create

        mcp = action.startswith(PREFIX)
        conversation = build_agent_chat(
            username=f"faults-{tag}",
            base_url=self.client.base_url(tag),
            timeout=timeout,
            tools=(action,) if action else ("memory.recall",),
            approval_tools=(action,) if action and not mcp else (),
            mcp_url=self.mcp.url if mcp else "",
        )
        return conversation_request_create(
            owner=conversation.owner, conversation=conversation, text=f"{ASK} [{tag}]"
        ).pk

    def unfinished(self, ids: list[int]) -> list[int]:
        from groups.models import GroupRequest

        return db_retry(
            lambda: list(
                GroupRequest.objects.filter(pk__in=ids)
                .exclude(state__in=GroupRequest.FINISHED_STATES)
                .values_list("pk", flat=True)
            )
        )

    def fences(self, ids: list[int]) -> dict[int, tuple[int, int]]:
        from groups.models import GroupRequest

        return db_retry(
            lambda: {
                pk: (f, c)
                for pk, f, c in GroupRequest.objects.filter(pk__in=ids).values_list(
                    "pk", "fence", "completed_fence"
                )
            }
        )

    def calls_in_flight(self, workers: list[Any]) -> list[tuple[int, int, Any]]:
        """(request id, client port, worker) of each model call the provider holds now for
        one of ``workers``."""
        by_tag = self.client.stats()["in_flight_by_tag"]
        request_of = {tag: pk for pk, tag in self.tags.items()}
        out = []
        for tag, ports in by_tag.items():
            if tag not in request_of:
                continue
            for port in ports:
                pid = socket_owner(port, [w.pid for w in workers], remote_port=self.provider_port)
                owner = next((w for w in workers if w.pid == pid), None)
                if owner is not None:
                    out.append((request_of[tag], port, owner))
        return out

    def port_in_flight(self, request_id: int, port: int) -> bool:
        return port in self.client.stats()["in_flight_by_tag"].get(self.tags[request_id], [])

    # the checks

    def check_safety(self, ids: list[int]) -> list[str]:
        return db_retry(lambda: self._check_safety(ids))

    def _check_safety(self, ids: list[int]) -> list[str]:
        # The provider and the MCP server first: every dispatch the provider has seen was
        # reserved (and committed) before, every call the MCP server has seen claimed.
        seen = self.client.stats()["per_tag"]
        mcp_runs = self.mcp.counts() if self.mcp is not None else None
        return safety_violations(ids, self.tags, seen, mcp_runs=mcp_runs)

    def wait_finished(
        self,
        ids: list[int],
        bound: float,
        tick: Callable[[], None] | None = None,
        *,
        completed: bool = False,
    ) -> list[str]:
        """Liveness: every request finished within ``bound`` seconds, with an outcome code
        (with ``completed``, completed)."""
        from groups.models import GroupRequest

        deadline = time.monotonic() + bound
        while self.unfinished(ids) and time.monotonic() < deadline:
            if tick:
                tick()
            time.sleep(0.2)
        return liveness_violations(
            db_retry(lambda: list(GroupRequest.objects.filter(pk__in=ids))),
            bound,
            completed=completed,
        )

    def decide_pending(self, ids: list[int], rng: Any, *, reject: float = 0.1) -> int:
        """Decide every pending approval of ``ids`` as its owner would (approve, or with
        probability ``reject`` reject); returns how many were approved."""
        from garden.errors import ServiceError
        from groups.models import Approval
        from groups.services.approvals import approval_decide

        approved = 0
        pending = db_retry(
            lambda: list(
                Approval.objects.filter(request_id__in=ids, status="pending").select_related(
                    "owner"
                )
            )
        )
        for approval in pending:
            decision = "reject" if rng.random() < reject else "approve"
            try:
                db_retry(
                    lambda a=approval, d=decision: approval_decide(
                        user=a.owner, approval_id=a.pk, decision=d, surface="api"
                    )
                )
            except ServiceError:  # decided meanwhile (the request was stopped)
                continue
            approved += decision == "approve"
        return approved

    def mcp_calls(self, ids: list[int]) -> dict[str, int]:
        """What became of the approvals of ``ids`` for the MCP server's tool: how many were
        approved and rejected, the calls the server received for them, and how many ended
        with an unknown outcome (and of those, how many calls had reached the server)."""
        from groups.models import Approval
        from groups.services.approvals import OUTCOME_UNKNOWN_REASON

        runs = self.mcp.counts()
        rows = db_retry(
            lambda: list(
                Approval.objects.filter(request_id__in=ids).values_list(
                    "status", "reason", "action", "approved_arguments"
                )
            )
        )
        found = Counter(approved=0, rejected=0, calls=0, unknown=0, unknown_called=0)
        for status, reason, action, changed in rows:
            record = mcp_record(action, changed)
            if record is None:
                continue
            found[status] += 1
            found["calls"] += runs.get(record, 0)
            if reason == OUTCOME_UNKNOWN_REASON:
                found["unknown"] += 1
                found["unknown_called"] += runs.get(record, 0) > 0
        return {k: found[k] for k in ("approved", "rejected", "calls", "unknown", "unknown_called")}

    def outcomes(self, ids: list[int]) -> Counter:
        from groups.models import GroupRequest

        return Counter(
            f"{s}:{c}"
            for s, c in db_retry(
                lambda: list(
                    GroupRequest.objects.filter(pk__in=ids).values_list("state", "outcome_code")
                )
            )
        )

    def finish(
        self,
        result: Result,
        ids: list[int],
        *,
        bound: float,
        started: float,
        completed: bool = True,
        tick: Callable[[], None] | None = None,
    ) -> Result:
        """Drain with a clean worker, then the liveness and safety checks over all of ``ids``
        (``completed``: every request must complete; ``tick`` runs while they finish). Also
        counts the working calls the provider received without tools (see the report)."""
        rescuers = [self.spawn("rescuer-") for _ in range(2)]
        result.violations += self.wait_finished(ids, bound, tick, completed=completed)
        result.violations += self.check_safety(ids)
        self.retire(rescuers)
        result.requests = ids
        result.outcomes = self.outcomes(ids)
        untooled = self.client.stats()["outcomes"].get("untooled", 0)
        result.details["untooled_calls"] = untooled - self._untooled
        self._untooled = untooled
        result.seconds = time.monotonic() - started
        return result
