"""The MCP servers the operator offers (``GARDEN_MCP_SERVERS``), to everyone or to named
users and groups: remote ones with headers read from the environment, local ones over stdio;
their tool lists are asked for at most every few minutes per site."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache

from garden import mcp_client
from garden.credentials import granted, parse_audience
from garden.tools.mcp_catalog import SERVER_NAME, listed_as_json

log = logging.getLogger(__name__)

# How long the operator's servers' tool lists are kept before they are asked again, and a
# failed listing before it is tried again.
OPERATOR_LIST_SECONDS = 300
OPERATOR_RETRY_SECONDS = 60


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
