"""The one rule set for a group's name, members, coordinator and room cap, on creation and on
change.

Pure: the caller loads the agents involved into ``Candidate`` values and gets back the
resolved group or a list of named errors (code, field, message). The API, the admin form and
the maker's tools all call these two functions, so the same change fails the same way
everywhere. Only what a change brings in is checked: a member removed from garden since it
joined does not block a rename and can be taken out, but cannot be added or made coordinator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NAME_MAX_CHARS = 100
MIN_RUNNABLE_MEMBERS = 2
MAKER = "maker"

NAME_REQUIRED = "NAME_REQUIRED"
NAME_TOO_LONG = "NAME_TOO_LONG"
TOO_FEW_MEMBERS = "TOO_FEW_MEMBERS"
MEMBER_NOT_FOUND = "MEMBER_NOT_FOUND"
MEMBER_REMOVED = "MEMBER_REMOVED"
DUPLICATE_MEMBER = "DUPLICATE_MEMBER"
MAKER_NOT_ALLOWED = "MAKER_NOT_ALLOWED"
COORDINATOR_NOT_MEMBER = "COORDINATOR_NOT_MEMBER"
COORDINATOR_REQUIRED = "COORDINATOR_REQUIRED"
COORDINATOR_CANNOT_RUN = "COORDINATOR_CANNOT_RUN"
ROOM_CAP_TOO_SMALL = "ROOM_CAP_TOO_SMALL"
ROOM_CAP_TOO_LARGE = "ROOM_CAP_TOO_LARGE"
# Below this a room holds an instruction and a turn or two: bounding would drop everything.
ROOM_CAP_MIN_CHARS = 4_000


@dataclass(frozen=True)
class GroupRuleError:
    code: str
    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "field": self.field, "message": self.message}


@dataclass(frozen=True)
class Candidate:
    """An agent as the rules see it."""

    id: int
    owner_id: int
    handle: str
    builtin: str = ""
    removed: bool = False
    can_run: bool = True

    @classmethod
    def of(cls, agent: Any) -> Candidate:
        return cls(
            id=agent.pk,
            owner_id=agent.owner_id,
            handle=agent.handle,
            builtin=agent.builtin or "",
            removed=agent.removed_at is not None,
            can_run=bool(agent.can_run),
        )


@dataclass(frozen=True)
class GroupShape:
    """A group's name, ordered member ids and coordinator id: what the rules decide on."""

    name: str
    members: tuple[int, ...]
    coordinator: int


@dataclass(frozen=True)
class RuleResult:
    shape: GroupShape | None
    errors: tuple[GroupRuleError, ...]

    @property
    def ok(self) -> bool:
        return not self.errors


def check_name(name: str | None) -> tuple[str, list[GroupRuleError]]:
    """The trimmed name, or the error that refuses it."""
    trimmed = (name or "").strip()
    if not trimmed:
        return trimmed, [GroupRuleError(NAME_REQUIRED, "name", "A group needs a name.")]
    if len(trimmed) > NAME_MAX_CHARS:
        return trimmed, [
            GroupRuleError(
                NAME_TOO_LONG, "name", f"A group name has at most {NAME_MAX_CHARS} characters."
            )
        ]
    return trimmed, []


def check_room_cap(value: int | None, *, maximum: int) -> list[GroupRuleError]:
    """The errors that refuse ``value`` as a group's room cap (``None``: not being set)."""
    if value is None:
        return []
    if value < ROOM_CAP_MIN_CHARS:
        return [
            GroupRuleError(
                ROOM_CAP_TOO_SMALL,
                "room_cap_chars",
                f"A room cap is at least {ROOM_CAP_MIN_CHARS:,} characters.",
            )
        ]
    if value > maximum:
        return [
            GroupRuleError(
                ROOM_CAP_TOO_LARGE,
                "room_cap_chars",
                f"A room cap is at most {maximum:,} characters on this site.",
            )
        ]
    return []


def _owned(agents: Mapping[int, Candidate], owner_id: int, agent_id: int) -> Candidate | None:
    agent = agents.get(agent_id)
    # Another owner's agent reads exactly like an unknown id: existence is not revealed.
    return agent if agent is not None and agent.owner_id == owner_id else None


def _check_brought_in(agent_id: int, agent: Candidate | None, field: str) -> list[GroupRuleError]:
    if agent is None:
        return [GroupRuleError(MEMBER_NOT_FOUND, field, f"No such agent: {agent_id}.")]
    if agent.builtin == MAKER:
        return [
            GroupRuleError(
                MAKER_NOT_ALLOWED,
                field,
                "Agent Father cannot join a group: the maker's platform tools stay outside the room.",
            )
        ]
    if agent.removed:
        return [GroupRuleError(MEMBER_REMOVED, field, f"@{agent.handle} has been removed.")]
    return []


def _check_duplicates(members: Sequence[int]) -> list[GroupRuleError]:
    seen: set[int] = set()
    repeated: dict[int, None] = {}
    for agent_id in members:
        if agent_id in seen:
            repeated[agent_id] = None
        seen.add(agent_id)
    return [
        GroupRuleError(DUPLICATE_MEMBER, "members", f"Agent {agent_id} is listed more than once.")
        for agent_id in repeated
    ]


def _check_runnable(
    members: Sequence[int], agents: Mapping[int, Candidate], owner_id: int
) -> list[GroupRuleError]:
    runnable = {
        agent_id
        for agent_id in members
        if (a := _owned(agents, owner_id, agent_id)) and a.builtin != MAKER and a.can_run
    }
    if len(runnable) < MIN_RUNNABLE_MEMBERS:
        return [
            GroupRuleError(
                TOO_FEW_MEMBERS,
                "members",
                f"A group needs {MIN_RUNNABLE_MEMBERS} members besides Agent Father that can run.",
            )
        ]
    return []


def _check_new_coordinator(
    coordinator_id: int, agents: Mapping[int, Candidate], owner_id: int
) -> list[GroupRuleError]:
    agent = _owned(agents, owner_id, coordinator_id)
    errors = _check_brought_in(coordinator_id, agent, "coordinator")
    if not errors and agent is not None and not agent.can_run:
        errors.append(
            GroupRuleError(
                COORDINATOR_CANNOT_RUN,
                "coordinator",
                f"@{agent.handle} cannot run (no model account), so it cannot coordinate.",
            )
        )
    return errors


def _coordinator_errors(
    coordinator: int, members: Sequence[int], agents: Mapping[int, Candidate], owner_id: int
) -> list[GroupRuleError]:
    """A newly chosen coordinator's errors: its own (``_check_new_coordinator``), else that it
    must be one of ``members``."""
    errors = _check_new_coordinator(coordinator, agents, owner_id)
    if not errors and coordinator not in members:
        errors.append(
            GroupRuleError(
                COORDINATOR_NOT_MEMBER, "coordinator", "The coordinator must be one of the members."
            )
        )
    return errors


def _unique(members: Sequence[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(members))


def check_group_create(
    *,
    owner_id: int,
    name: str | None,
    members: Sequence[int],
    coordinator: int | None,
    agents: Mapping[int, Candidate],
    default_coordinator: Candidate | None,
) -> RuleResult:
    """Creation: everything is brought in, so everything is checked.

    Without a coordinator the owner's Concierge (``default_coordinator``) coordinates and
    joins the members first if it is not listed; a coordinator named explicitly must be
    listed among the members.
    """
    trimmed, errors = check_name(name)
    errors += _check_duplicates(members)
    for agent_id in _unique(members):
        errors += _check_brought_in(agent_id, _owned(agents, owner_id, agent_id), "members")
    resolved = list(_unique(members))
    if coordinator is None and default_coordinator is None:
        coordinator_errors = [
            GroupRuleError(
                COORDINATOR_REQUIRED, "coordinator", "Choose a coordinator among the members."
            )
        ]
    elif coordinator is None:
        coordinator = default_coordinator.id
        agents = {**agents, coordinator: default_coordinator}
        coordinator_errors = _check_new_coordinator(coordinator, agents, owner_id)
        if not coordinator_errors and coordinator not in resolved:
            resolved.insert(0, coordinator)
    else:
        coordinator_errors = _coordinator_errors(coordinator, resolved, agents, owner_id)
    errors += coordinator_errors
    errors += _check_runnable(resolved, agents, owner_id)
    if errors or coordinator is None:
        return RuleResult(None, tuple(errors))
    return RuleResult(GroupShape(trimmed, tuple(resolved), coordinator), ())


def check_group_change(
    *,
    owner_id: int,
    current: GroupShape,
    agents: Mapping[int, Candidate],
    name: str | None = None,
    members: Sequence[int] | None = None,
    coordinator: int | None = None,
) -> RuleResult:
    """A change: ``None`` leaves that part as it is; only what the change brings in is checked.

    Members kept from ``current`` are not re-checked (a removed one may stay or be taken
    out); members added and a newly chosen coordinator are. The two-runnable-members rule
    applies to the resulting membership only when the change brings a member in: a change
    that only takes members out brings nothing in, so it is never refused by it, however few
    can run afterwards (the coordinator itself stays, see COORDINATOR_NOT_MEMBER).
    """
    errors: list[GroupRuleError] = []
    new_name = current.name
    if name is not None:
        new_name, errors = check_name(name)
    new_members = current.members
    brings_in = False
    if members is not None:
        errors += _check_duplicates(members)
        new_members = _unique(members)
        for agent_id in new_members:
            if agent_id not in current.members:
                errors += _check_brought_in(agent_id, _owned(agents, owner_id, agent_id), "members")
        brings_in = bool(set(new_members) - set(current.members))
    new_coordinator = current.coordinator
    if coordinator is not None and coordinator != current.coordinator:
        new_coordinator = coordinator
        errors += _coordinator_errors(coordinator, new_members, agents, owner_id)
    elif new_coordinator not in new_members:
        errors.append(
            GroupRuleError(
                COORDINATOR_NOT_MEMBER,
                "members",
                "The coordinator stays a member; choose another coordinator before taking it out.",
            )
        )
    if brings_in:
        errors += _check_runnable(new_members, agents, owner_id)
    if errors:
        return RuleResult(None, tuple(errors))
    return RuleResult(GroupShape(new_name, tuple(new_members), new_coordinator), ())
