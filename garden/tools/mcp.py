"""The tools of MCP servers: an owner's own (``McpServer`` rows) and those the operator offers
(``garden.tools.mcp_operator``), each reaching an agent as ``mcp.<server>.<tool>`` once its
owner enables it. A call validates its arguments against the tool's input schema
(``run_tool``), then runs through ``garden.mcp_client`` within a deadline and a byte cap;
pictures it returns are kept as artifacts of the thread; every failure is a named tool error."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from garden import mcp_client
from garden.credentials import CredentialError, api_key_decrypt
from garden.egress.deadline import clamp
from garden.errors import QuotaExceeded
from garden.models import Artifact, AttachmentData, McpServer
from garden.providers.types import ToolSpec
from garden.storage import storage_hold
from garden.tools import Tool, ToolContext, ToolOutcome, ToolSource, register_source
from garden.tools.mcp_catalog import PREFIX, split_name, tool_name
from garden.tools.mcp_operator import operator_servers, operator_servers_for, operator_tools

# Pictures kept of one result, and the kinds kept.
MAX_PICTURES = 8
PICTURE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

# Where a tool's server is, read when it is called (an owner's headers are decrypted then).
Endpointer = Callable[[], mcp_client.Endpoint]


def server_headers(server: McpServer) -> dict[str, str]:
    """The server's stored headers, decrypted now (CredentialError when unreadable)."""
    if not server.headers_encrypted:
        return {}
    return json.loads(api_key_decrypt(server.headers_encrypted))


def _tool(server: str, listed: dict[str, Any], endpoint: Endpointer) -> Tool:
    name = tool_name(server, listed["name"])
    hints = listed.get("annotations") or {}
    return Tool(
        spec=ToolSpec(
            name=name,
            description=(listed.get("description") or listed["name"])
            + f" (a tool of the MCP server {server})",
            parameters=listed["input_schema"],
        ),
        handler=lambda ctx, args: mcp_call(
            ctx, args, server=server, tool=listed["name"], endpoint=endpoint
        ),
        meta={"mcp_server": server, "annotations": hints},
    )


def _offered(server: str, tools: list[dict[str, Any]], endpoint: Endpointer) -> dict[str, Tool]:
    return {
        tool_name(server, t["name"]): _tool(server, t, endpoint)
        for t in tools
        if not t.get("unusable")
    }


def _owner_endpoint(row: McpServer) -> Endpointer:
    def endpoint() -> mcp_client.Endpoint:
        try:
            headers = server_headers(row)
        except CredentialError as exc:
            raise mcp_client.McpFailure(exc.code, exc.message) from None
        return mcp_client.Endpoint(url=row.url, headers=headers)

    return endpoint


def listing(owner_id: int) -> dict[str, Tool]:
    """Every MCP tool ``owner_id`` may give its agents: its own servers' first, then the
    operator's it is offered (an owner's server of the same name hides the operator's)."""
    found: dict[str, Tool] = {}
    user = get_user_model().objects.filter(pk=owner_id).first()
    if user is not None:
        for server in operator_servers_for(user):
            found.update(_offered(server.name, operator_tools(server), server.endpoint))
    for row in McpServer.objects.filter(owner_id=owner_id):
        found = {k: v for k, v in found.items() if split_name(k)[0] != row.name}
        found.update(_offered(row.name, row.tools, _owner_endpoint(row)))
    return found


def resolve_many(owner_id: int, names: list[str]) -> dict[str, Tool]:
    """The tools of ``names`` that ``owner_id`` may use, found with one read of its servers
    (and, for a name no server of its own answers, of the site's it is offered)."""
    wanted: dict[str, set[str]] = {}
    for name in names:
        parts = split_name(name)
        if parts is not None:
            wanted.setdefault(parts[0], set()).add(parts[1])
    if not wanted:
        return {}
    found: dict[str, Tool] = {}
    own = McpServer.objects.filter(owner_id=owner_id, name__in=list(wanted))
    for row in own:
        found.update(_picked(row.name, row.tools, wanted.pop(row.name), _owner_endpoint(row)))
    offered = {n: s for n, s in operator_servers().items() if n in wanted}
    if offered:
        user = get_user_model().objects.filter(pk=owner_id).first()
        for name, server in offered.items():
            if user is not None and server.granted_to(user):
                found.update(_picked(name, operator_tools(server), wanted[name], server.endpoint))
    return found


def _picked(
    server: str, tools: list[dict[str, Any]], names: set[str], endpoint: Endpointer
) -> dict[str, Tool]:
    return {
        tool_name(server, t["name"]): _tool(server, t, endpoint)
        for t in tools
        if t.get("name") in names and not t.get("unusable")
    }


def resolve(owner_id: int, name: str) -> Tool | None:
    return resolve_many(owner_id, [name]).get(name)


def describe(name: str, arguments: dict[str, Any]) -> str:
    parts = split_name(name)
    if parts is None:
        return f"use {name}"
    said = ", ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    if len(said) > 160:
        said = said[:159] + "…"
    return f"run {parts[1]} on the MCP server {parts[0]}" + (f" ({said})" if said else "")


def _failed(server: str, tool: str, code: str, message: str) -> ToolOutcome:
    return ToolOutcome(f"{code}: {tool} on {server}: {message}", is_error=True, code=code)


def mcp_call(
    ctx: ToolContext, args: dict[str, Any], *, server: str, tool: str, endpoint: Endpointer
) -> ToolOutcome:
    """One call of ``tool`` on ``server`` for ``ctx``'s owner, within GARDEN_MCP_TIMEOUT (or
    what is left of the step's tool time) and GARDEN_MCP_MAX_RESULT_BYTES."""
    try:
        timeout = clamp(float(settings.GARDEN_MCP_TIMEOUT), TimeoutError)
        result = mcp_client.call_tool(
            endpoint(),
            owner_id=ctx.owner_id,
            timeout=timeout,
            max_bytes=settings.GARDEN_MCP_MAX_RESULT_BYTES,
            name=tool,
            arguments=args,
        )
    except TimeoutError:
        return _failed(server, tool, "MCP_TIMEOUT", "no time was left for the call.")
    except mcp_client.McpFailure as failure:
        return _failed(server, tool, failure.code, failure.message)
    parts = [result.text] if result.text else []
    if result.structured is not None and json.dumps(result.structured) not in result.text:
        parts.append("structured: " + json.dumps(result.structured, ensure_ascii=False))
    parts += result.extra
    kept: list[int] = []
    pictures = [(t, d) for t, d in result.images if t in PICTURE_TYPES and d]
    if len(pictures) < len(result.images):
        parts.append(
            f"[{len(result.images) - len(pictures)} pictures left out: empty or not "
            f"{', '.join(sorted(PICTURE_TYPES))}]"
        )
    if len(pictures) > MAX_PICTURES:
        parts.append(f"[{len(pictures) - MAX_PICTURES} more pictures left out]")
    for media_type, data in pictures[:MAX_PICTURES]:
        try:
            kept.append(_keep_picture(ctx, server, tool, media_type, data))
        except QuotaExceeded as refused:
            parts.append(f"[a picture ({media_type}) was not kept: {refused.code}]")
    parts += [f"[picture kept as artifact {pk}]" for pk in kept]
    content = "\n".join(parts) or "(no content)"
    if result.is_error:
        return ToolOutcome(f"MCP_TOOL_ERROR: {content}", True, "MCP_TOOL_ERROR", tuple(kept))
    return ToolOutcome(content, artifacts=tuple(kept))


def _keep_picture(ctx: ToolContext, server: str, tool: str, media_type: str, data: bytes) -> int:
    """A picture a tool returned, as an artifact of the thread (the Canvas shows it), written
    and then held to the owner's storage under its quota lock: QuotaExceeded (STORAGE_FULL)
    rolls it back. Runs outside any transaction, as every tool does, so the lock is last."""
    with transaction.atomic():
        artifact = Artifact.objects.create(
            owner_id=ctx.owner_id,
            agent_id=ctx.agent_id,
            conversation_id=ctx.conversation_id,
            kind="image",
            title=f"{tool} ({server}) picture",
            mime_type=media_type[:100],
            size=len(data),
        )
        AttachmentData.objects.create(artifact=artifact, data=data)
        storage_hold(owner_id=ctx.owner_id)
    return artifact.pk


def servers_offered(*, owner: AbstractBaseUser) -> list[dict[str, Any]]:
    """Every MCP server ``owner`` may use, as the API and the dashboard show it: its own first
    (with the names of its stored headers, never their values), then the site's."""

    def tools(server: str, listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {
                **t,
                "agent_tool": "" if t.get("unusable") else tool_name(server, t["name"]),
            }
            for t in listed
        ]

    found = [
        {
            "id": row.pk,
            "name": row.name,
            "url": row.url,
            "offered_by": "owner",
            "header_names": row.header_names,
            "tools": tools(row.name, row.tools),
            "refreshed_at": row.refreshed_at,
        }
        for row in McpServer.objects.filter(owner=owner)
    ]
    own = {f["name"] for f in found}
    found += [
        {
            "id": None,
            "name": server.name,
            "url": server.url,
            "offered_by": "operator",
            "header_names": [],
            "tools": tools(server.name, operator_tools(server)),
            "refreshed_at": None,
        }
        for server in operator_servers_for(owner)
        if server.name not in own
    ]
    return found


MCP_TOOLS = register_source(
    ToolSource(
        prefix=PREFIX,
        resolve=resolve,
        resolve_many=resolve_many,
        listing=listing,
        describe=describe,
    )
)
