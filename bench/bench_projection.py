"""Time project() + bound() on rooms of 100, 1,000 and 10,000 turns; cost must grow linearly.

Run: python bench/bench_projection.py
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

# Runnable from anywhere without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from garden.providers.types import ArtifactRef, Block, TextBlock, ToolCall, ToolResult
from groups.domain.bounding import RoomTooLarge, bound
from groups.domain.projection import AgentView, GroupView, Turn, project

CONCIERGE = AgentView(1, "concierge", "Concierge", "Coordinate the household team.")
LEDGER = AgentView(2, "ledger", "Ledger", "Keep the books precisely.")
ADVISOR = AgentView(3, "advisor", "Finance Advisor", "Advise on savings.")
SCOUT = AgentView(4, "scout", "Scout", "Research prices.")
GROUP = GroupView(10, "Household finances", CONCIERGE.id, (CONCIERGE, LEDGER, ADVISOR, SCOUT))
MEMBERS = (LEDGER, ADVISOR, SCOUT)
CAP = 120_000  # a conservative room cap, well under a small model's context
RUNS = 7
SIZES = (100, 1_000, 10_000)

PROSE = (
    "Spending this month came to 1,240 EUR, of which groceries were 410 EUR and transport "
    "185 EUR. The reimbursement from work is still counted as income; "
)


def room(turns: int) -> list[Turn]:
    """A realistic mix: owner requests, coordination, member tool use, contributions, asks."""
    out: list[Turn] = []
    seq = 0

    def add(
        kind: str,
        agent: AgentView | None,
        *content: Block,
        addressed_agent_id: int | None = None,
        reply_to_call_id: str | None = None,
    ) -> None:
        nonlocal seq
        seq += 1
        out.append(
            Turn(
                seq,
                "owner" if agent is None else "agent",
                None if agent is None else agent.id,
                None if agent is None else agent.handle,
                content,
                kind,
                addressed_agent_id=addressed_agent_id,
                reply_to_call_id=reply_to_call_id,
            )
        )

    cycle = 0
    while len(out) < turns:
        member = MEMBERS[cycle % 3]
        ask = f"ask-{cycle}"
        call = f"call-{cycle}"
        add("turn", None, TextBlock(f"Request {cycle}: review the spending. " + PROSE))
        add(
            "turn",
            CONCIERGE,
            TextBlock("Asking a member."),
            ToolCall(ask, "group.ask", {"member": member.handle, "ask": "Summarise it."}),
        )
        add(
            "coordination",
            CONCIERGE,
            TextBlock(f"{member.name}, summarise the transactions."),
            addressed_agent_id=member.id,
        )
        add("activity", None, TextBlock(f"Concierge asked {member.name} to work."))
        add("turn", member, ToolCall(call, "ledger.query", {"month": cycle % 12 + 1}))
        add(
            "turn", member, ToolResult(call, "date;amount;payee\n" + "2024-05-01;12.50;shop\n" * 20)
        )
        add(
            "turn",
            member,
            TextBlock(PROSE * 2),
            ArtifactRef(f"art-{cycle}", "image", "Spending chart"),
            reply_to_call_id=ask,
        )
        add("turn", CONCIERGE, ToolResult(ask, f"@{member.handle} said: " + PROSE * 2))
        add("turn", CONCIERGE, TextBlock("Consolidated answer: " + PROSE))
        cycle += 1
    return out[:turns]


def median_ms(fn: Callable[[], object], runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    print(
        f"machine: Python {platform.python_version()} ({platform.python_implementation()}), "
        f"os.cpu_count()={os.cpu_count()}, {platform.machine()}"
    )
    print(f"cap {CAP:,} chars, median of {RUNS} runs, projected for @ledger and @concierge")
    print()
    header = (
        f"{'turns':>7} {'agent':>10} {'chars':>10} {'project ms':>11} {'bound ms':>9} "
        f"{'total ms':>9} {'µs/turn':>8}"
    )
    print(header)
    print("-" * len(header))
    for size in SIZES:
        transcript = room(size)
        for agent in (LEDGER, CONCIERGE):
            projection = project(transcript, agent=agent, group=GROUP)
            bounded = bound(projection, CAP)
            assert not isinstance(bounded, RoomTooLarge), bounded
            assert bounded.char_count() <= CAP
            p_ms = median_ms(lambda a=agent, t=transcript: project(t, agent=a, group=GROUP))
            b_ms = median_ms(lambda p=projection: bound(p, CAP))
            t_ms = median_ms(
                lambda a=agent, t=transcript: bound(project(t, agent=a, group=GROUP), CAP)
            )
            print(
                f"{size:>7,} {'@' + agent.handle:>10} {projection.char_count():>10,} "
                f"{p_ms:>11.2f} {b_ms:>9.2f} {t_ms:>9.2f} {t_ms * 1000 / size:>8.2f}"
            )


if __name__ == "__main__":
    main()
