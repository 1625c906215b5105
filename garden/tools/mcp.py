"""The tools of MCP servers: an owner's own (``McpServer`` rows) and those the operator offers
(``GARDEN_MCP_SERVERS``), each reaching an agent as ``mcp.<server>.<tool>`` once its owner
enables it. A call validates its arguments against the tool's input schema (``run_tool``),
then runs through ``garden.mcp_client`` within a deadline and a byte cap; pictures it
returns are kept as artifacts of the thread; every failure is a named tool error."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jsonschema
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.db import transaction

from garden import mcp_client
from garden.credentials import CredentialError, api_key_decrypt, granted, parse_audience
from garden.egress.deadline import clamp
from garden.errors import QuotaExceeded
from garden.models import Artifact, AttachmentData, McpServer
from garden.providers.types import ToolSpec
from garden.storage import storage_check
from garden.tools import Tool, ToolContext, ToolOutcome, ToolSource, register_source

log = logging.getLogger(__name__)

PREFIX = "mcp."
SERVER_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,18}[a-z0-9])?$")
# A tool's name must survive the providers' wire form (``.`` → ``__``, at most 64 characters
# of letters, digits, ``_`` and ``-``) and map back exactly: no dots, no double underscore.
TOOL_NAME = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")
MAX_DESCRIPTION = 1_000
MAX_SCHEMA_BYTES = 32_768
MAX_WIRE_NAME = 64
# Pictures kept of one result, and the kinds kept.
MAX_PICTURES = 8
PICTURE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# How long the operator's servers' tool lists are kept before they are asked again, and a
# failed listing before it is tried again.
OPERATOR_LIST_SECONDS = 300
OPERATOR_RETRY_SECONDS = 60

# Where a tool's server is, read when it is called (an owner's headers are decrypted then).
Endpointer = Callable[[], mcp_client.Endpoint]


def tool_name(server: str, tool: str) -> str:
    return f"{PREFIX}{server}.{tool}"


def split_name(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` of ``mcp.<server>.<tool>``, or None."""
    if not name.startswith(PREFIX):
        return None
    server, dot, tool = name[len(PREFIX) :].partition(".")
    return (server, tool) if dot and server and tool else None


def usable(server: str, listed: dict[str, Any]) -> str | None:
    """Why a listed tool cannot be offered to a model, or None when it can."""
    name = listed.get("name", "")
    if not TOOL_NAME.match(name):
        return "its name is not letters, digits, single underscores and dashes"
    if len(f"mcp__{server}__{name}") > MAX_WIRE_NAME:
        return f"its name is too long (at most {MAX_WIRE_NAME} characters with the server's)"
    schema = listed.get("input_schema")
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return "its input schema is not an object schema"
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        return f"its input schema is larger than {MAX_SCHEMA_BYTES:,} bytes"
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"its input schema is not valid JSON Schema ({exc.message})"
    return _unsupported(schema)


def _unsupported(node: Any) -> str | None:
    """What of a schema garden does not apply: a reference outside the schema (it would be
    fetched) and ``patternProperties`` (its patterns would be matched without a time bound);
    ``pattern`` itself is matched within one (``garden.tools``)."""
    if isinstance(node, list):
        return next((why for why in map(_unsupported, node) if why), None)
    if not isinstance(node, dict):
        return None
    for key in ("$ref", "$dynamicRef", "$recursiveRef"):
        ref = node.get(key)
        if isinstance(ref, str) and not ref.startswith("#"):
            return f"its input schema refers outside itself ({key} {ref[:100]!r})"
    if "patternProperties" in node:
        return "its input schema uses patternProperties"
    return next((why for why in map(_unsupported, node.values()) if why), None)


def listed_as_json(tools: list[mcp_client.ListedTool], server: str) -> list[dict[str, Any]]:
    """What is kept of a server's ``tools/list``: each tool with its description clipped, and
    a tool that cannot be offered marked with why (``unusable``)."""
    kept = []
    for tool in tools:
        entry = {
            "name": tool.name[:200],
            "description": tool.description[:MAX_DESCRIPTION],
            "input_schema": tool.input_schema,
            "annotations": {
                k: v
                for k, v in tool.annotations.items()
                if k
                in ("title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
            },
        }
        why = usable(server, entry)
        if why:
            entry["input_schema"] = {}
            entry["unusable"] = why
        kept.append(entry)
    return kept


# --- the operator's servers --------------------------------------------------------------


@dataclass(frozen=True)
class OperatorServer:
    """A server the operator offers to everyone or to named users: remote (``url`` with
    headers read from the environment) or local (``command`` over stdio, the operator's
    alone to configure)."""

    name: str
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()  # (header, environment variable)
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # (variable, environment variable it is read from)
    users: frozenset[str] | None = None  # None: every user
    groups: frozenset[str] = frozenset()

    def granted_to(self, user: AbstractBaseUser) -> bool:
        return granted(user, users=self.users, groups=self.groups)

    def endpoint(self) -> mcp_client.Endpoint:
        if self.command:
            return mcp_client.Endpoint(
                command=self.command,
                args=self.args,
                env={k: os.environ.get(var, "") for k, var in self.env} or None,
            )
        return mcp_client.Endpoint(
            url=self.url,
            # A value read from a file-mounted variable often ends in a newline.
            headers={h: os.environ.get(var, "").strip() for h, var in self.headers},
            purpose="mcp_site",
        )


def parse_operator_servers(config: Any) -> dict[str, OperatorServer]:
    """``GARDEN_MCP_SERVERS``, checked; raises ValueError naming the first problem."""
    if not isinstance(config, dict):
        raise ValueError("must be a JSON object of name -> {url|command, headers, users|groups}")
    found: dict[str, OperatorServer] = {}
    for name, spec in config.items():
        where = f"MCP server {name!r}"
        if not SERVER_NAME.match(str(name)):
            raise ValueError(
                f"{where}: a name is lower-case letters, digits and dashes (at most 20)"
            )
        if not isinstance(spec, dict):
            raise ValueError(f"{where} must be an object")
        unknown = set(spec) - {"url", "headers", "command", "args", "env", "users", "groups"}
        if unknown:
            raise ValueError(f"{where} has unknown fields: {', '.join(sorted(unknown))}")
        if bool(spec.get("url")) == bool(spec.get("command")):
            raise ValueError(f"{where}: give exactly one of url or command")
        for key in ("headers", "env"):
            value = spec.get(key, {})
            if not isinstance(value, dict) or not all(
                isinstance(v, str) and v.startswith("env:") for v in value.values()
            ):
                raise ValueError(f'{where}: {key} maps names to "env:VARIABLE"')
        args = spec.get("args", [])
        if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
            raise ValueError(f"{where}: args must be a list of strings")
        users, groups = parse_audience(spec, where)
        found[str(name)] = OperatorServer(
            name=str(name),
            url=str(spec.get("url") or ""),
            headers=tuple((h, v[4:]) for h, v in spec.get("headers", {}).items()),
            command=str(spec.get("command") or ""),
            args=tuple(args),
            env=tuple((k, v[4:]) for k, v in spec.get("env", {}).items()),
            users=users,
            groups=groups,
        )
    return found


def operator_servers() -> dict[str, OperatorServer]:
    return _parsed(json.dumps(settings.GARDEN_MCP_SERVERS, sort_keys=True))


@lru_cache(maxsize=4)
def _parsed(config: str) -> dict[str, OperatorServer]:
    return parse_operator_servers(json.loads(config))


def operator_servers_for(user: AbstractBaseUser) -> list[OperatorServer]:
    return [s for _, s in sorted(operator_servers().items()) if s.granted_to(user)]


def operator_tools(server: OperatorServer) -> list[dict[str, Any]]:
    """An operator's server's tools, listed at most every OPERATOR_LIST_SECONDS per site
    (a failed listing is tried again after OPERATOR_RETRY_SECONDS, offering nothing)."""
    config = json.dumps([server.url, server.command, server.args]).encode()
    key = f"garden:mcp-operator:{server.name}:{hashlib.sha256(config).hexdigest()[:16]}"
    kept = cache.get(key)
    if kept is not None:
        return kept
    try:
        listed = mcp_client.list_tools(
            server.endpoint(),
            owner_id=None,
            timeout=settings.GARDEN_MCP_TIMEOUT,
            max_bytes=settings.GARDEN_MCP_MAX_RESULT_BYTES,
        )
    except mcp_client.McpFailure as failure:
        log.warning("the operator's MCP server %s lists no tools: %s", server.name, failure)
        cache.set(key, [], OPERATOR_RETRY_SECONDS)
        return []
    kept = listed_as_json(listed, server.name)
    cache.set(key, kept, OPERATOR_LIST_SECONDS)
    return kept


# --- tools -------------------------------------------------------------------------------


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
    """A picture a tool returned, as an artifact of the thread (the Canvas shows it)."""
    storage_check(owner_id=ctx.owner_id, adding=len(data))
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
