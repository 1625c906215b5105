"""Writes for the MCP servers an owner adds: each is listed (``tools/list``) before anything
is stored, so a server that cannot be reached or does not speak MCP is refused by name and
leaves nothing behind; its secret headers are kept like a pasted key (encrypted, write-only)
and dropped when its URL moves to another origin."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from garden import egress, mcp_client
from garden.credentials import CredentialError, api_key_encrypt
from garden.errors import QuotaExceeded, ServiceError, not_found, scope_refused
from garden.models import Agent, McpServer
from garden.quotas import quota_hold
from garden.tools.mcp import server_headers
from garden.tools.mcp_catalog import PREFIX, SERVER_NAME, listed_as_json

MAX_HEADERS = 10
MAX_HEADER_VALUE = 4_096
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")
# A field value (RFC 9110): visible characters, spaces and tabs inside, none at either end.
_HEADER_VALUE = re.compile(
    r"^[\x21-\x7e\x80-\xff](?:[\x20-\x7e\x80-\xff\t]{0,4094}[\x21-\x7e\x80-\xff])?$"
)
_TOKEN = re.compile(r"^[\x21-\x7e]{1,4000}$")
# Headers the HTTP client or the MCP transport sets itself.
_RESERVED_HEADERS = {
    "host",
    "content-length",
    "content-type",
    "accept",
    "accept-encoding",
    "connection",
    "transfer-encoding",
    "mcp-session-id",
    "mcp-protocol-version",
    "cookie",
}


def _check_name(owner: AbstractBaseUser, name: str, *, server: McpServer | None = None) -> None:
    if not SERVER_NAME.match(name or ""):
        raise ServiceError(
            "INVALID_NAME",
            "A server's name is 1 to 20 lower-case letters, digits and dashes (it names its tools: "
            "mcp.<name>.<tool>).",
            field="name",
        )
    others = McpServer.objects.filter(owner=owner, name=name)
    if server is not None:
        others = others.exclude(pk=server.pk)
    if others.exists():
        raise ServiceError("NAME_TAKEN", f"You have a server named {name}.", field="name")


def _check_url(url: str) -> str:
    url = (url or "").strip()
    if len(url) > 500:
        raise ServiceError("INVALID_URL", "A server's URL is at most 500 characters.", field="url")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        raise ServiceError("INVALID_URL", "Not a URL.", field="url") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ServiceError(
            "INVALID_URL", "An MCP server's URL is http(s)://host/path.", field="url"
        )
    try:
        egress.check_url(url, "mcp")
    except egress.EgressRefused as exc:
        raise ServiceError(exc.code, exc.message, field="url") from None
    return url


def _check_headers(headers: dict[str, Any] | None, bearer_token: str | None) -> dict[str, str]:
    found: dict[str, str] = {}
    if headers is not None and not isinstance(headers, dict):
        raise ServiceError(
            "INVALID_HEADERS", "headers is an object of name -> value.", field="headers"
        )
    for name, value in (headers or {}).items():
        if not isinstance(value, str) or not _HEADER_NAME.match(str(name)):
            raise ServiceError(
                "INVALID_HEADERS",
                f"{str(name)[:100]!r} is not a header name with a text value.",
                field="headers",
            )
        if name.lower() in _RESERVED_HEADERS:
            raise ServiceError(
                "INVALID_HEADERS", f"{name} is set by garden itself.", field="headers"
            )
        if not _HEADER_VALUE.match(value):
            raise ServiceError(
                "INVALID_HEADERS",
                f"{name}'s value is empty, longer than {MAX_HEADER_VALUE} characters, starts or "
                "ends with a space, or has a control character.",
                field="headers",
            )
        found[name] = value
    if bearer_token:
        if not _TOKEN.match(bearer_token):
            raise ServiceError(
                "INVALID_HEADERS",
                "The bearer token has spaces or line breaks.",
                field="bearer_token",
            )
        found = {k: v for k, v in found.items() if k.lower() != "authorization"}
        found["Authorization"] = f"Bearer {bearer_token}"
    if len(found) > MAX_HEADERS:
        raise ServiceError("INVALID_HEADERS", f"At most {MAX_HEADERS} headers.", field="headers")
    return found


def _encrypt(headers: dict[str, str]) -> str:
    if not headers:
        return ""
    try:
        return api_key_encrypt(json.dumps(headers))
    except CredentialError as exc:
        raise ServiceError(exc.code, exc.message, field="headers") from None


def _listed(url: str, headers: dict[str, str], *, owner_id: int, name: str) -> list[dict]:
    """The server's tools, or the refusal that names why there are none (nothing stored)."""
    try:
        tools = mcp_client.list_tools(
            mcp_client.Endpoint(url=url, headers=headers),
            owner_id=owner_id,
            timeout=settings.GARDEN_MCP_TIMEOUT,
            max_bytes=settings.GARDEN_MCP_MAX_RESULT_BYTES,
        )
    except mcp_client.McpFailure as failure:
        raise ServiceError(failure.code, f"{name}: {failure.message}", field="url") from None
    return listed_as_json(tools, name)


def mcp_server_create(
    *,
    owner: AbstractBaseUser,
    name: str,
    url: str,
    headers: dict[str, str] | None = None,
    bearer_token: str | None = None,
) -> McpServer:
    """Add a server: checked, listed over the network (outside any transaction), then stored
    under the owner's quota (GARDEN_MAX_MCP_SERVERS_PER_OWNER)."""
    _check_name(owner, name)
    url = _check_url(url)
    sent = _check_headers(headers, bearer_token)
    encrypted = _encrypt(sent)
    tools = _listed(url, sent, owner_id=owner.pk, name=name)
    limit = settings.GARDEN_MAX_MCP_SERVERS_PER_OWNER
    try:
        with transaction.atomic():
            server = McpServer.objects.create(
                owner=owner,
                name=name,
                url=url,
                headers_encrypted=encrypted,
                header_names=sorted(sent),
                tools=tools,
                refreshed_at=timezone.now(),
            )
            quota_hold(
                owner_id=owner.pk,
                limit=limit,
                count=McpServer.objects.filter(owner=owner).count,
                refusal=lambda: QuotaExceeded(
                    "MCP_SERVER_LIMIT",
                    f"You have {limit} MCP servers, the limit on this site; remove one first.",
                ),
            )
    except IntegrityError:
        raise ServiceError("NAME_TAKEN", f"You have a server named {name}.", field="name") from None
    return server


def mcp_server_refresh(*, server: McpServer) -> McpServer:
    """List the server's tools again and keep them (what Test does); a failure is refused by
    name and keeps what was listed before."""
    try:
        headers = server_headers(server)
    except CredentialError as exc:
        raise ServiceError(exc.code, exc.message, field="headers") from None
    tools = _listed(server.url, headers, owner_id=server.owner_id, name=server.name)
    if not McpServer.objects.filter(pk=server.pk).update(tools=tools, refreshed_at=timezone.now()):
        raise _gone()
    server.refresh_from_db()
    return server


@dataclass(frozen=True)
class ServerChange:
    server: McpServer
    headers_cleared: bool


def _origin(url: str) -> tuple[str, str, int | None]:
    parsed = httpx.URL(url)
    return parsed.scheme, parsed.host, parsed.port


_UNCHANGED: Any = object()


def mcp_server_update(
    *,
    server: McpServer,
    url: str = _UNCHANGED,
    headers: dict[str, str] | None = None,
    bearer_token: str | None = None,
    clear_headers: bool = False,
    manage: bool = True,
) -> ServerChange:
    """Change the URL or the headers, then list again. A URL on another origin without new
    headers drops the stored ones (``headers_cleared``): a secret never follows a server
    elsewhere. The name stays: it names the tools agents have enabled. Without ``manage`` (a
    token without that scope) a change that would replace or drop stored headers, or move the
    server to another origin while an agent has an approval policy for one of its tools, is
    refused (403 TOKEN_SCOPE) before anything is listed or written."""
    new_url = server.url if url is _UNCHANGED else _check_url(url)
    given = headers is not None or bool(bearer_token)
    moved = _origin(new_url) != _origin(server.url)
    if not manage and (
        (server.header_names and (given or moved or clear_headers))
        or (moved and _has_policies(server))
    ):
        raise scope_refused("manage")
    if given:
        sent = _check_headers(headers, bearer_token)
    elif clear_headers or moved:
        sent = {}
    else:
        try:
            sent = server_headers(server)
        except CredentialError as exc:
            raise ServiceError(exc.code, exc.message, field="headers") from None
    cleared = bool(server.header_names) and not given and (moved or clear_headers)
    tools = _listed(new_url, sent, owner_id=server.owner_id, name=server.name)
    with transaction.atomic():
        changed = McpServer.objects.filter(pk=server.pk).update(
            url=new_url,
            headers_encrypted=_encrypt(sent),
            header_names=sorted(sent),
            tools=tools,
            refreshed_at=timezone.now(),
        )
        if not changed:
            raise _gone()
        if moved:
            # Another server now answers to these names: the owner's choices for the old one's
            # tools do not carry over (each is by its annotations again).
            _forget_tools(server, enabled=False)
    server.refresh_from_db()
    return ServerChange(server=server, headers_cleared=cleared)


def _gone() -> ServiceError:
    return not_found("MCP server")


def _has_policies(server: McpServer) -> bool:
    """Whether any of the owner's agents has an approval policy for one of the server's tools."""
    prefix = f"{PREFIX}{server.name}."
    policies = Agent.objects.filter(owner_id=server.owner_id).values_list(
        "tool_approvals", flat=True
    )
    return any(name.startswith(prefix) for chosen in policies for name in chosen or {})


def _forget_tools(server: McpServer, *, enabled: bool) -> None:
    """Take the server's tools' approval policies (and with ``enabled``, the tools themselves)
    off the owner's agents. Caller holds the transaction."""
    prefix = f"{PREFIX}{server.name}."
    for agent in Agent.objects.select_for_update(no_key=True).filter(owner_id=server.owner_id):
        tools = [t for t in agent.enabled_tools if not (enabled and t.startswith(prefix))]
        policies = {
            k: v for k, v in (agent.tool_approvals or {}).items() if not k.startswith(prefix)
        }
        if tools != agent.enabled_tools or policies != agent.tool_approvals:
            agent.enabled_tools = tools
            agent.tool_approvals = policies
            agent.save(update_fields=["enabled_tools", "tool_approvals"])


@transaction.atomic
def mcp_server_delete(*, server: McpServer) -> None:
    """Remove the server, and its tools from the owner's agents (their settings with them)."""
    _forget_tools(server, enabled=True)
    server.delete()
