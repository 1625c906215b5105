"""What the fault harness reports: one ``Result`` per scenario, a progress line as each ends, and
the final table with its totals and every violation."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Result:
    scenario: str
    trials: int = 0
    faults: int = 0
    requests: list[int] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    outcomes: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    note: str = ""
    details: dict[str, int] = field(default_factory=dict)


def progress(r: Result) -> None:
    print(
        f"  {r.scenario}: {r.trials} trials, {r.faults} faults, {len(r.requests)} requests, "
        f"{len(r.violations)} violations, {r.seconds:.0f} s",
        flush=True,
    )
    for v in r.violations[:10]:
        print(f"    VIOLATION: {v}", flush=True)


def table(results: list[Result]) -> str:
    lines = [
        "| scenario | trials | faults injected | requests | outcomes | violations | calls without tools "
        "| seconds | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(r.outcomes.items()))
        lines.append(
            f"| {r.scenario} | {r.trials} | {r.faults} | {len(r.requests)} | {outcomes} | "
            f"{len(r.violations)} | {r.details.get('untooled_calls', 0)} | {r.seconds:.0f} | {r.note} |"
        )
    return "\n".join(lines)


def summary(results: list[Result], *, sweep_errors: int) -> list[str]:
    """Print the table, the totals and every violation; returns the violations."""
    print()
    print(table(results))
    violations = [v for r in results for v in r.violations]
    print(
        f"\n{sum(r.trials for r in results)} trials, {sum(r.faults for r in results)} faults injected, "
        f"{sum(len(r.requests) for r in results)} requests, {len(violations)} violations; "
        f"sweeper errors while services were cut: {sweep_errors}"
    )
    for v in violations:
        print(f"VIOLATION: {v}")
    return violations
