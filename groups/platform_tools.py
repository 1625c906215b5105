"""The maker's platform tools: Agent Father creates an agent or a group from a description,
and changes or archives one of its owner's groups.

They go through the same services, rule set and quotas as the API and the dashboard, so a
change the owner could not make there fails here with the same named error. The owner is
always Agent Father's own (from the trusted tool context, never the arguments); a group is
named by id and a deleted group, or another owner's, is not found. Each needs the owner's
approval by default (``garden.services.agents.BUILTINS``).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from django.core.exceptions import ValidationError

from garden.api.serializers import AgentInput
from garden.errors import ServiceError
from garden.models import Agent, ModelAccount
from garden.providers.types import ToolSpec
from garden.services.accounts import scripted_account_for
from garden.services.agents import agent_create
from garden.tools import Tool, ToolContext, ToolOutcome, register
from groups import selectors
from groups.services.groups import group_archive, group_create, group_update

_HANDLE = {
    "type": "string",
    "pattern": "^@?[-a-zA-Z0-9_]{1,40}$",
    "description": "An agent's handle, with or without the @.",
}
_GROUP_ID = {"type": "integer", "minimum": 1, "description": "The group's id."}

UPDATE_GROUP_PARAMETERS: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "platform.update_group arguments",
    "type": "object",
    "additionalProperties": False,
    "required": ["group_id"],
    "properties": {
        "group_id": _GROUP_ID,
        "name": {
            "type": "string",
            "minLength": 1,
            "maxLength": 200,
            "description": "The new name (at most 100 characters once trimmed).",
        },
        "members": {
            "type": "array",
            "items": _HANDLE,
            "minItems": 1,
            "maxItems": 50,
            "description": "The whole new membership, in order. Members not listed "
            "leave the group; the coordinator must stay listed.",
        },
        "coordinator": {**_HANDLE, "description": "The member who coordinates the group."},
    },
}

ARCHIVE_GROUP_PARAMETERS: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "platform.archive_group arguments",
    "type": "object",
    "additionalProperties": False,
    "required": ["group_id"],
    "properties": {"group_id": _GROUP_ID},
}

CREATE_AGENT_PARAMETERS: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "platform.create_agent arguments",
    "type": "object",
    "additionalProperties": False,
    "required": ["handle", "name"],
    "properties": {
        "handle": {**_HANDLE, "description": "The new agent's handle, unique among yours."},
        "name": {"type": "string", "minLength": 1, "maxLength": 100},
        "instructions": {"type": "string", "maxLength": 20_000},
        "model_account": {
            "type": "integer",
            "minimum": 1,
            "description": "The id of one of your owner's model accounts; without it, the "
            "offline scripted one.",
        },
        "enabled_tools": {
            "type": "array",
            "items": {"type": "string", "maxLength": 80},
            "maxItems": 50,
        },
        "approval_tools": {
            "type": "array",
            "items": {"type": "string", "maxLength": 80},
            "maxItems": 50,
            "description": "Which of its tools wait for the owner's approval.",
        },
    },
}

CREATE_GROUP_PARAMETERS: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "platform.create_group arguments",
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "members"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 200},
        "members": {
            "type": "array",
            "items": _HANDLE,
            "minItems": 1,
            "maxItems": 50,
            "description": "The members, in order.",
        },
        "coordinator": {
            **_HANDLE,
            "description": "The member who coordinates; without it, Concierge.",
        },
    },
}

CREATE_AGENT = ToolSpec(
    name="platform.create_agent",
    description="Create an agent for your owner: its handle, name and instructions, and "
    "optionally its model account (by id), its tools and which of them need approval. The "
    "same rules and limits as your owner's own agent form apply.",
    parameters=CREATE_AGENT_PARAMETERS,
)

CREATE_GROUP = ToolSpec(
    name="platform.create_group",
    description="Create a group of your owner's agents: a name, the members by handle in "
    "order, and optionally the coordinator (Concierge otherwise). At least two members "
    "besides you that can run; you cannot join a group yourself.",
    parameters=CREATE_GROUP_PARAMETERS,
)

UPDATE_GROUP = ToolSpec(
    name="platform.update_group",
    description="Change one of your owner's groups: its name, its members (the whole list, in "
    "order) or its coordinator. The same rules as creation apply: at least two members "
    "besides you that can run, only your owner's agents, no removed agent added, and the "
    "coordinator among the members. You cannot join a group yourself.",
    parameters=UPDATE_GROUP_PARAMETERS,
)

ARCHIVE_GROUP = ToolSpec(
    name="platform.archive_group",
    description="Archive one of your owner's groups: it leaves the roster and keeps its "
    "transcript. Its running request, if any, is stopped.",
    parameters=ARCHIVE_GROUP_PARAMETERS,
)

MAKER_ONLY = "MAKER_ONLY"
INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
GROUP_NOT_FOUND = "GROUP_NOT_FOUND"
NOTHING_TO_CHANGE = "NOTHING_TO_CHANGE"


def _error(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field}}


MAKER_ONLY_MESSAGE = "Only Agent Father can make or change agents and groups."


def _check_caller(agent: Agent) -> dict[str, Any] | None:
    if agent.builtin != Agent.Builtin.MAKER or agent.removed_at is not None:
        return _error(MAKER_ONLY, MAKER_ONLY_MESSAGE)
    return None


def _check_arguments(spec: ToolSpec, arguments: Any) -> dict[str, Any] | None:
    try:
        jsonschema.validate(arguments, spec.parameters)
    except jsonschema.ValidationError as exc:
        field = ".".join(str(p) for p in exc.absolute_path) or None
        return _error(INVALID_ARGUMENTS, exc.message, field)
    return None


def _group_of(agent: Agent, group_id: int):
    # Only its owner's own groups exist for the maker (not those of a team it is in);
    # deleted ones do not exist at all.
    group = selectors.group_get(person=agent.owner, group_id=group_id, right="write")
    return group if group is not None and group.owner_id == agent.owner_id else None


def _group_result(group) -> dict[str, Any]:
    group = selectors.group_get(person=group.owner, group_id=group.pk) or group
    members = getattr(group, "ordered_memberships", None)
    if members is None:
        members = group.memberships.select_related("agent").order_by("position", "id")
    return {
        "group": {
            "id": group.pk,
            "name": group.name,
            "coordinator": group.coordinator.handle,
            "members": [m.agent.handle for m in members],
            "archived": group.archived_at is not None,
        }
    }


def _service_error(exc: ServiceError) -> dict[str, Any]:
    if exc.code == "NOT_FOUND":
        return _error(GROUP_NOT_FOUND, "No such group.", "group_id")
    if exc.code != "invalid":
        return _error(exc.code, exc.message, exc.field)
    # The rule set's refusal: the first broken rule, and every one of them.
    first = exc.errors[0]
    result = _error(first.code, first.message, first.field)
    result["errors"] = [
        {"code": e.code, "field": e.field, "message": e.message} for e in exc.errors
    ]
    return result


def _agent_ids(agent: Agent, handles: list[str]) -> dict[str, int]:
    """The owner's agents by handle (removed ones too: the rules decide whether naming them
    is allowed)."""
    wanted = [h.lstrip("@") for h in handles]
    return dict(
        Agent.objects.filter(owner_id=agent.owner_id, handle__in=wanted).values_list("handle", "pk")
    )


def platform_create_agent(*, agent: Agent, arguments: dict[str, Any]) -> dict[str, Any]:
    """Create an agent of the maker's owner: ``{"agent": …}`` or ``{"error": …}``."""
    refusal = _check_caller(agent) or _check_arguments(CREATE_AGENT, arguments)
    if refusal:
        return refusal
    data = AgentInput(data={**arguments, "handle": arguments["handle"].lstrip("@")})
    if not data.is_valid():
        field, messages = next(iter(data.errors.items()))
        return _error(INVALID_ARGUMENTS, str(messages[0]), field)
    v = data.validated_data
    owner = agent.owner
    if "model_account" in v:
        account = ModelAccount.objects.filter(owner=owner, pk=v["model_account"]).first()
        if account is None:
            return _error("MODEL_ACCOUNT_NOT_FOUND", "No such model account.", "model_account")
    else:
        account = scripted_account_for(owner=owner)
    try:
        made = agent_create(
            owner=owner,
            handle=v["handle"],
            name=v["name"],
            model_account=account,
            instructions=v["instructions"],
            enabled_tools=v["enabled_tools"],
            approval_tools=v["approval_tools"],
        )
    except ServiceError as exc:
        return _service_error(exc)
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        return _error(INVALID_ARGUMENTS, str(messages[0]), field)
    return {
        "agent": {
            "id": made.pk,
            "handle": made.handle,
            "name": made.name,
            "model_account": account.pk,
            "enabled_tools": made.enabled_tools,
            "approval_tools": made.approval_tools,
        }
    }


def platform_create_group(*, agent: Agent, arguments: dict[str, Any]) -> dict[str, Any]:
    """Create a group of the maker's owner: ``{"group": …}`` or ``{"error": …}``."""
    refusal = _check_caller(agent) or _check_arguments(CREATE_GROUP, arguments)
    if refusal:
        return refusal
    coordinator = arguments.get("coordinator")
    by_handle = _agent_ids(agent, [*arguments["members"], *([coordinator] if coordinator else [])])
    for field, handles in (("members", arguments["members"]), ("coordinator", [coordinator])):
        for handle in filter(None, handles):
            if handle.lstrip("@") not in by_handle:
                return _error("MEMBER_NOT_FOUND", f"No such agent: @{handle.lstrip('@')}.", field)
    try:
        group = group_create(
            owner=agent.owner,
            name=arguments["name"],
            members=[by_handle[h.lstrip("@")] for h in arguments["members"]],
            coordinator=by_handle[coordinator.lstrip("@")] if coordinator else None,
        )
    except ServiceError as exc:
        return _service_error(exc)
    return _group_result(group)


def platform_update_group(*, agent: Agent, arguments: dict[str, Any]) -> dict[str, Any]:
    """Change a group of the maker's owner: ``{"group": …}`` or ``{"error": …}``."""
    refusal = _check_caller(agent) or _check_arguments(UPDATE_GROUP, arguments)
    if refusal:
        return refusal
    if not {"name", "members", "coordinator"} & set(arguments):
        return _error(NOTHING_TO_CHANGE, "Give a name, members or a coordinator to change.")
    group = _group_of(agent, arguments["group_id"])
    if group is None:
        return _error(GROUP_NOT_FOUND, "No such group.", "group_id")
    wanted = list(arguments.get("members", []))
    if "coordinator" in arguments:
        wanted.append(arguments["coordinator"])
    by_handle = _agent_ids(agent, wanted)
    for field in ("members", "coordinator"):
        handles = arguments.get(field)
        for handle in [handles] if isinstance(handles, str) else handles or []:
            if handle.lstrip("@") not in by_handle:
                return _error("MEMBER_NOT_FOUND", f"No such agent: @{handle.lstrip('@')}.", field)
    try:
        group = group_update(
            group=group,
            name=arguments.get("name"),
            members=(
                [by_handle[h.lstrip("@")] for h in arguments["members"]]
                if "members" in arguments
                else None
            ),
            coordinator=(
                by_handle[arguments["coordinator"].lstrip("@")]
                if "coordinator" in arguments
                else None
            ),
        )
    except ServiceError as exc:
        return _service_error(exc)
    return _group_result(group)


def platform_archive_group(*, agent: Agent, arguments: dict[str, Any]) -> dict[str, Any]:
    """Archive a group of the maker's owner: ``{"group": …}`` or ``{"error": …}``."""
    refusal = _check_caller(agent) or _check_arguments(ARCHIVE_GROUP, arguments)
    if refusal:
        return refusal
    group = _group_of(agent, arguments["group_id"])
    if group is None:
        return _error(GROUP_NOT_FOUND, "No such group.", "group_id")
    try:
        group = group_archive(group=group)
    except ServiceError as exc:
        return _service_error(exc)
    return _group_result(group)


def _outcome(result: dict[str, Any]) -> ToolOutcome:
    error = result.get("error")
    return ToolOutcome(
        json.dumps(result), is_error=error is not None, code=error["code"] if error else ""
    )


def _caller(ctx: ToolContext) -> Agent | None:
    # Who is calling comes from the trusted context, never from the arguments.
    return (
        Agent.objects.filter(pk=ctx.agent_id, owner_id=ctx.owner_id).select_related("owner").first()
    )


def _handler(tool):
    def handle(ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
        agent = _caller(ctx)
        if agent is None:
            return _outcome(_error(MAKER_ONLY, MAKER_ONLY_MESSAGE))
        return _outcome(tool(agent=agent, arguments=arguments))

    return handle


for spec, tool, describe, general in (
    (CREATE_AGENT, platform_create_agent, "create the agent @{handle}", "create an agent"),
    (CREATE_GROUP, platform_create_group, "create the group {name}", "create a group"),
    (UPDATE_GROUP, platform_update_group, "change group {group_id}", "change a group"),
    (ARCHIVE_GROUP, platform_archive_group, "archive group {group_id}", "archive a group"),
):
    register(
        Tool(
            spec=spec,
            handler=_handler(tool),
            meta={"describe": describe, "describe_general": general},
        )
    )
