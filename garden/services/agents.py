"""Writes for agents, including each owner's built-in agents."""

from __future__ import annotations

from collections.abc import Collection

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from garden.errors import FieldError, QuotaExceeded, ServiceError, scope_refused
from garden.models import Agent, ModelAccount
from garden.quotas import quota_hold
from garden.services.accounts import scripted_account_for
from garden.services.maker_script import MAKER_SCRIPT, MAKER_SCRIPT_ACCOUNT_NAME
from garden.tools import APPROVAL_POLICIES, Tool, all_tools, is_sourced, owner_tools

MAKER_TOOLS = [
    "platform.create_agent",
    "platform.create_group",
    "platform.update_group",
    "platform.archive_group",
]

BUILTINS = {
    Agent.Builtin.MAKER: {
        "handle": "father",
        "name": "Agent Father",
        "colour": "#8a6d3b",
        "instructions": "You are Agent Father, the maker. You create and change agents and groups "
        "for your owner with the platform tools.",
        "enabled_tools": MAKER_TOOLS,
        # Each change the maker makes waits for its owner's approval (the owner may turn that
        # off per tool on its page).
        "approval_tools": MAKER_TOOLS,
    },
    Agent.Builtin.CONCIERGE: {
        "handle": "concierge",
        "name": "Concierge",
        "colour": "#2e7d6b",
        "instructions": "You are Concierge. You coordinate: interpret the owner's request, ask "
        "members for contributions with group.ask, and bring the results together into one "
        "answer.",
        # Reading what the team made (an output too large to carry is kept as an artifact).
        "enabled_tools": ["file.list", "file.read"],
    },
}


@transaction.atomic
def agent_builtins_ensure(*, owner: AbstractBaseUser) -> dict[str, Agent]:
    """Give ``owner`` Agent Father and Concierge if they lack them; idempotent. Concierge
    starts on the shared offline account; Agent Father on an offline account of its own,
    whose script makes an agent by name through its platform tool (``maker_script``), so the
    maker does something offline and no other agent speaks its lines."""
    shared = scripted_account_for(owner=owner)
    found = {}
    for builtin, spec in BUILTINS.items():
        agent = Agent.objects.filter(owner=owner, builtin=builtin).first()
        if agent is None:
            account = shared
            if builtin == Agent.Builtin.MAKER:
                account = ModelAccount.objects.create(
                    owner=owner,
                    name=MAKER_SCRIPT_ACCOUNT_NAME,
                    provider=ModelAccount.Provider.SCRIPTED,
                    model="scripted",
                    options=MAKER_SCRIPT,
                )
            agent = Agent.objects.create(
                owner=owner, builtin=builtin, model_account=account, **spec
            )
        found[builtin] = agent
    return found


# New agents take these in turn, so faces in a room tell their speakers apart.
PALETTE = (
    "#5b8def",
    "#c0392b",
    "#8e44ad",
    "#16a085",
    "#d35400",
    "#2c3e50",
    "#b7950b",
    "#1f7a3d",
    "#a93226",
    "#2471a3",
)


def agent_next_colour(*, owner: AbstractBaseUser) -> str:
    """The colour a new agent of ``owner`` gets unless one is chosen."""
    return PALETTE[Agent.objects.filter(owner=owner).count() % len(PALETTE)]


def assignable_tools(*, builtin: str) -> dict[str, str]:
    """The tools an agent of kind ``builtin`` may be given, by name, with their descriptions:
    every registered tool but the loop's own and, on anyone but the maker, the maker's."""
    return {
        name: tool.spec.description
        for name, tool in sorted(all_tools().items())
        if not tool.loop_handled and (name not in MAKER_TOOLS or builtin == Agent.Builtin.MAKER)
    }


def agent_tools_check(
    *,
    builtin: str,
    enabled_tools: list[str],
    approval_tools: list[str],
    owner_id: int | None = None,
    tool_approvals: dict[str, str] | None = None,
    sourced: dict[str, Tool] | None = None,
    already: Collection[str] = (),
) -> None:
    """Refuse tools an agent cannot be given, naming each: unknown names (an MCP tool is known
    when one of ``owner_id``'s servers lists it), the loop's own tools (group.ask is the
    coordinator's by its role, not a setting), the maker's platform tools on anyone but the
    maker, approval asked for a tool the agent does not have, and an MCP tool's approval given
    anywhere but ``tool_approvals`` or as anything but a policy. ``sourced`` is the owner's MCP
    tools when the caller looked them up already; an MCP tool the agent has ``already`` stays
    (its server may be down or have dropped it: the owner can still take it off)."""
    tools = all_tools()
    new = [n for n in enabled_tools if is_sourced(n) and n not in already]
    if new and sourced is None and owner_id is not None:
        sourced = owner_tools(owner_id)
    tools.update(sourced or {})
    errors: list[FieldError] = []
    for name in dict.fromkeys(enabled_tools):
        tool = tools.get(name)
        if tool is None and is_sourced(name) and name in already:
            continue
        if tool is None:
            errors.append(FieldError("enabled_tools", "UNKNOWN_TOOL", f"No such tool: {name}."))
        elif tool.loop_handled:
            errors.append(
                FieldError(
                    "enabled_tools",
                    "TOOL_NOT_ALLOWED",
                    f"{name} comes with the agent's role in a group; it is not enabled by hand.",
                )
            )
        elif name in MAKER_TOOLS and builtin != Agent.Builtin.MAKER:
            errors.append(
                FieldError("enabled_tools", "TOOL_NOT_ALLOWED", f"{name} is Agent Father's alone.")
            )
    for name, policy in (tool_approvals or {}).items():
        if not is_sourced(name) or name not in enabled_tools:
            errors.append(
                FieldError(
                    "tool_approvals",
                    "TOOL_NOT_ENABLED",
                    f"{name} is not among the agent's MCP tools, so it has no approval policy.",
                )
            )
        elif policy not in APPROVAL_POLICIES:
            errors.append(
                FieldError(
                    "tool_approvals",
                    "INVALID_APPROVAL_POLICY",
                    f"{name}: a policy is one of {', '.join(APPROVAL_POLICIES)}.",
                )
            )
    for name in dict.fromkeys(approval_tools):
        if is_sourced(name):
            errors.append(
                FieldError(
                    "approval_tools",
                    "USE_TOOL_APPROVALS",
                    f"{name} is an MCP tool: set its approval in tool_approvals (always, never "
                    "or annotations).",
                )
            )
        elif name not in enabled_tools:
            errors.append(
                FieldError(
                    "approval_tools",
                    "TOOL_NOT_ENABLED",
                    f"{name} is not among the agent's tools, so it cannot need approval.",
                )
            )
    if errors:
        raise ServiceError(errors[0].code, errors[0].message, field=errors[0].field, errors=errors)


def agent_create(
    *,
    owner: AbstractBaseUser,
    handle: str,
    name: str,
    model_account: ModelAccount,
    instructions: str = "",
    colour: str | None = None,
    enabled_tools: list[str] | None = None,
    approval_tools: list[str] | None = None,
    tool_approvals: dict[str, str] | None = None,
    delegation_allowlist: list[Agent] | None = None,
    manage: bool = True,
) -> Agent:
    """Create an agent; the caller has validated ownership of ``model_account``. A handle
    the owner has already is refused (HANDLE_TAKEN), a concurrent create's too. Without
    ``manage`` no MCP tool's approval may be ``never``: an agent made to run a tool unasked
    is an approval switched off (stricter rules than the default need only ``write``)."""
    if not manage and "never" in (tool_approvals or {}).values():
        raise scope_refused("manage")
    agent_tools_check(
        builtin="",
        enabled_tools=enabled_tools or [],
        approval_tools=approval_tools or [],
        owner_id=owner.pk,
        tool_approvals=tool_approvals,
    )

    def taken() -> ServiceError:
        return ServiceError("HANDLE_TAKEN", f"@{handle} is taken.", field="handle")

    if Agent.objects.filter(owner=owner, handle=handle).exists():
        raise taken()
    agent = Agent(
        owner=owner,
        handle=handle,
        name=name,
        model_account=model_account,
        instructions=instructions,
        colour=colour or agent_next_colour(owner=owner),
        enabled_tools=enabled_tools or [],
        approval_tools=approval_tools or [],
        tool_approvals=tool_approvals or {},
    )
    agent.full_clean()
    limit = settings.GARDEN_MAX_AGENTS_PER_OWNER
    try:
        with transaction.atomic():
            agent.save()
            if delegation_allowlist:
                agent.delegation_allowlist.set(delegation_allowlist)
            quota_hold(
                owner_id=owner.pk,
                limit=limit,
                count=Agent.objects.filter(owner=owner, removed_at__isnull=True).count,
                refusal=lambda: QuotaExceeded(
                    "AGENT_LIMIT",
                    f"You have {limit} agents, the limit on this site; remove one to make another.",
                ),
            )
    except IntegrityError as exc:  # a concurrent create took the handle
        raise taken() from exc
    return agent


_UNSET = object()


def agent_update(
    *,
    agent: Agent,
    name: str | None = None,
    colour: str | None = None,
    instructions: str | None = None,
    model_account: ModelAccount | None = None,
    enabled_tools: list[str] | None = None,
    approval_tools: list[str] | None = None,
    tool_approvals: dict[str, str] | None = None,
    delegation_allowlist: list[Agent] | None = None,
    manage: bool = True,
) -> Agent:
    """Change what is given (``None`` leaves a part as it is); the caller has checked that
    ``model_account`` and the allowlist's agents are the owner's. Without ``manage`` (a token
    without that scope) a change of the approval rules — ``approval_tools``, ``tool_approvals``,
    or a rule that goes with a tool taken away — is refused (403 TOKEN_SCOPE) and nothing is
    written: an approval a script could switch off guards nothing against that script.

    A step already running keeps the settings it read; the next step of every room the agent
    is in reads the new ones (the room's roster follows the agent row).
    """
    # The owner's MCP tools, looked up before any row is locked (a site's server may be asked).
    sourced = (
        owner_tools(agent.owner_id) if any(is_sourced(n) for n in enabled_tools or []) else None
    )
    with transaction.atomic():
        # Read under the row lock: two changes at once never write back each other's stale
        # tools (a name change must not drop an approval rule another change just added).
        agent = Agent.objects.select_for_update(no_key=True).get(pk=agent.pk)
        if agent.removed_at is not None:
            raise ServiceError(
                "AGENT_REMOVED", f"@{agent.handle} has been removed; it cannot change.", status=409
            )
        fields = []
        if enabled_tools is not None or approval_tools is not None or tool_approvals is not None:
            tools = agent.enabled_tools if enabled_tools is None else enabled_tools
            approvals = agent.approval_tools if approval_tools is None else approval_tools
            policies = agent.tool_approvals if tool_approvals is None else tool_approvals
            if enabled_tools is not None:
                # Taking a tool away takes its approval rule with it.
                if approval_tools is None:
                    approvals = [t for t in approvals if t in tools]
                if tool_approvals is None:
                    policies = {k: v for k, v in (policies or {}).items() if k in tools}
            if not manage and (
                set(approvals) != set(agent.approval_tools or [])
                or dict(policies or {}) != (agent.tool_approvals or {})
            ):
                raise scope_refused("manage")
            agent_tools_check(
                builtin=agent.builtin,
                enabled_tools=tools,
                approval_tools=approvals,
                owner_id=agent.owner_id,
                tool_approvals=policies,
                sourced=sourced,
                already=agent.enabled_tools,
            )
            agent.enabled_tools = list(dict.fromkeys(tools))
            agent.approval_tools = list(dict.fromkeys(approvals))
            agent.tool_approvals = dict(policies or {})
            fields += ["enabled_tools", "approval_tools", "tool_approvals"]
        if delegation_allowlist is not None and any(a.pk == agent.pk for a in delegation_allowlist):
            raise ServiceError(
                "SELF_DELEGATION",
                "An agent does not ask itself for help.",
                field="delegation_allowlist",
            )
        changes = {
            "name": name,
            "colour": colour,
            "instructions": instructions,
            "model_account": model_account,
        }
        for key, value in changes.items():
            if value is not None:
                setattr(agent, key, value)
                fields.append(key)
        agent.full_clean(exclude=["owner", "delegation_allowlist"], validate_unique=False)
        if fields:
            agent.save(update_fields=fields)
        if delegation_allowlist is not None:
            agent.delegation_allowlist.set(delegation_allowlist)
    return agent


def agent_remove(*, agent: Agent) -> None:
    """Take ``agent`` out of garden: it stops running and cannot join or coordinate a group.

    Its turns keep their speaker, groups it is a member of keep it listed (it can be taken
    out), and its handle stays its own. Built-in agents stay; an agent coordinating a group is
    refused until the group has another coordinator.
    """
    if agent.builtin:
        raise ServiceError(
            "BUILTIN_AGENT",
            f"{agent.name} is built in; change its model account or instructions instead.",
            status=409,
        )
    with transaction.atomic():
        # The agent's row locked first, as a group change that names it locks it: a group
        # cannot make it coordinator between this check and the removal.
        Agent.objects.select_for_update(no_key=True).filter(pk=agent.pk).first()
        # The groups app sits above this one: its rows are reached through the relation it
        # adds.
        coordinated = list(
            # (its own room, kind "solo", is not a group it coordinates)
            agent.coordinated_groups.filter(deleted_at__isnull=True)
            .exclude(kind="solo")
            .values_list("name", flat=True)
        )
        if coordinated:
            names = ", ".join(coordinated)
            raise ServiceError(
                "AGENT_COORDINATES",
                f"@{agent.handle} coordinates {names}; choose another coordinator there first.",
                status=409,
            )
        Agent.objects.filter(pk=agent.pk, removed_at__isnull=True).update(removed_at=timezone.now())
