"""Which destinations the egress policy refuses: the operator's allowlists, the address
classes that are not public, and the check of a host (every address it resolves to) or of a
URL an owner saves."""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import httpcore
import httpx
from django.conf import settings

from garden.egress.deadline import clamp, current_owner
from garden.egress.resolver import Resolver

logger = logging.getLogger(__name__)

Purpose = Literal["provider", "tool", "telegram", "mcp", "mcp_site", "webhook"]
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Cloud metadata services, named as such in a refusal (all are non-public anyway).
METADATA_NETWORKS: tuple[Network, ...] = (
    ipaddress.ip_network("169.254.169.254/32"),  # AWS, GCP, Azure, OpenStack, ...
    ipaddress.ip_network("169.254.170.2/32"),  # AWS ECS task metadata
    ipaddress.ip_network("100.100.100.200/32"),  # Alibaba Cloud
    ipaddress.ip_network("fd00:ec2::254/128"),  # AWS over IPv6
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_ULA = ipaddress.ip_network("fc00::/7")


class EgressRefused(Exception):
    """An outbound request the policy refuses; nothing was sent. ``code`` names it;
    ``destination`` says it was refused for where the host leads. ``message`` never names the
    address a *name* resolved to (the log does, for the operator)."""

    code = "EGRESS_REFUSED"

    def __init__(self, message: str, *, destination: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.destination = destination


_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
)


@dataclass(frozen=True)
class Allowlist:
    """What the operator allows beyond public addresses: host names, ``*.suffix`` wildcards and
    networks, each on any port or on one port (``ollama.internal:11434``)."""

    hosts: frozenset[tuple[str, int | None]] = frozenset()
    suffixes: tuple[tuple[str, int | None], ...] = ()
    networks: tuple[tuple[Network, int | None], ...] = ()

    def names(self, host: str, port: int) -> bool:
        host = host.lower().rstrip(".")
        return any(h == host and p in (None, port) for h, p in self.hosts) or any(
            host.endswith(s) and p in (None, port) for s, p in self.suffixes
        )

    def holds(self, address: Address, port: int) -> bool:
        return any(
            address in net and p in (None, port)
            for net, p in self.networks
            if net.version == address.version
        )


def _split_port(entry: str) -> tuple[str, int | None]:
    """``host:port``, ``[v6]:port``, ``[v6]/len``, ``[v6]/len:port`` or ``10.0.0.0/8:port``; a
    bare IPv6 address or network keeps its colons. Raises ValueError on anything else after a
    bracket (``[::]x``), so no entry is read as less than it says."""
    if entry.startswith("["):
        inside, closed, rest = entry[1:].partition("]")
        if not closed:
            raise ValueError(f"an unclosed bracket: {entry!r}")
        prefix, colon, port = rest.partition(":")
        if prefix and not (prefix.startswith("/") and prefix[1:].isdigit()):
            raise ValueError(f"not an address, network or port after the bracket: {entry!r}")
        if colon and not port.isdigit():
            raise ValueError(f"not a port: {entry!r}")
        return inside + prefix, int(port) if colon else None
    head, sep, tail = entry.rpartition(":")
    if sep and tail.isdigit() and ":" not in head:
        return head, int(tail)
    return entry, None


def _numeric_label(name: str) -> bool:
    """Whether the last label reads as a number (``2130706433``, ``0x7f``, ``1.2.3.999``): a
    URL parser and the resolver read such a host as an IPv4 address, not a name."""
    last = name.rstrip(".").rsplit(".", 1)[-1]
    return last.isdigit() or (
        last.startswith("0x") and all(c in "0123456789abcdef" for c in last[2:])
    )


def parse_allowlist(entries: Sequence[str]) -> Allowlist:
    """``["10.0.0.0/8", "192.168.1.20:8000", "ollama.internal:11434", "*.corp.example"]``;
    raises ValueError naming a malformed entry."""
    hosts: set[tuple[str, int | None]] = set()
    suffixes: list[tuple[str, int | None]] = []
    networks: list[tuple[Network, int | None]] = []
    for raw in entries:
        entry = raw.strip().lower()
        if not entry:
            continue
        try:
            value, port = _split_port(entry)
        except ValueError as exc:
            raise ValueError(f"not a host name, address or network: {raw!r} ({exc})") from None
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"not a port: {raw!r}")
        try:
            networks.append((ipaddress.ip_network(value, strict=False), port))
            continue
        except ValueError:
            pass
        name = value[2:] if value.startswith("*.") else value
        if not _HOST_NAME.match(name.rstrip(".")) or _numeric_label(name):
            raise ValueError(f"not a host name, address or network: {raw!r}")
        if value.startswith("*."):
            suffixes.append(("." + name.rstrip("."), port))
        else:
            hosts.add((name.rstrip("."), port))
    return Allowlist(frozenset(hosts), tuple(suffixes), tuple(networks))


@lru_cache(maxsize=8)
def _allowlist(entries: tuple[str, ...]) -> Allowlist:
    return parse_allowlist(entries)


def allowlist_for(purpose: Purpose) -> Allowlist:
    """The operator's allowlist for ``purpose``, read from settings at every check (so a test's
    override or a reload applies at once; parsing is cached)."""
    entries = tuple(settings.GARDEN_EGRESS_ALLOW)
    if purpose == "provider":
        entries += tuple(settings.GARDEN_EGRESS_ALLOW_PROVIDERS)
    elif purpose == "telegram":
        entries += tuple(settings.GARDEN_EGRESS_ALLOW_TELEGRAM)
    elif purpose == "mcp":
        entries += tuple(settings.GARDEN_EGRESS_ALLOW_MCP)
    elif purpose == "mcp_site":
        entries += _site_mcp_hosts(settings.GARDEN_MCP_SERVERS)
    elif purpose == "webhook":
        entries += tuple(settings.GARDEN_EGRESS_ALLOW_WEBHOOK)
    return _allowlist(entries)


def _site_mcp_hosts(config: object) -> tuple[str, ...]:
    """The host and port of each remote MCP server the operator configured: reachable for the
    site's own servers (never for an owner's, whose allowlist is GARDEN_EGRESS_ALLOW_MCP)."""
    if not isinstance(config, dict):
        return ()
    hosts = []
    for spec in config.values():
        url = spec.get("url") if isinstance(spec, dict) else None
        if isinstance(url, str) and url:
            parsed = httpx.URL(url)
            port = parsed.port or (443 if parsed.scheme == "https" else 80)
            host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
            hosts.append(f"{host}:{port}")
    return tuple(hosts)


def _unwrap(address: Address) -> Address:
    """The IPv4 address an IPv6 form carries (mapped, NAT64, 6to4, Teredo), else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
        if address.teredo is not None:
            return address.teredo[1]
    return address


def refusal_reason(address: Address) -> str | None:
    """Why ``address`` is not a public destination, or None when it is."""
    inner = _unwrap(address)
    for candidate in {address, inner}:
        if any(candidate in net for net in METADATA_NETWORKS if net.version == candidate.version):
            return "a cloud metadata address"
        if candidate.is_loopback:
            return "a loopback address"
        if candidate.is_unspecified:
            return "an unspecified address"
        if candidate.is_link_local:
            return "a link-local address"
        if candidate.is_multicast:
            return "a multicast address"
        if isinstance(candidate, ipaddress.IPv6Address) and candidate in _ULA:
            return "a unique-local address"
        if isinstance(candidate, ipaddress.IPv6Address) and candidate.is_site_local:
            return "a site-local address"
        if candidate.is_private:
            return "a private address"
        if candidate.is_reserved or not candidate.is_global:
            return "a reserved or non-public address"
    return None


# The process's one resolver: lookups counted per owner and per purpose (resolver.py).
RESOLVER = Resolver()


def resolve(
    host: str,
    port: int,
    *,
    purpose: Purpose = "tool",
    owner_id: int | None = None,
    resolver: Resolver | None = None,
) -> list[Address]:
    """Every address ``host`` resolves to for a TCP connection, in the resolver's order. The
    lookup counts against ``owner_id`` (else the owner of the request in progress) and
    ``purpose``, and waits no longer than GARDEN_EGRESS_DNS_TIMEOUT within the current
    deadline (a slow name server would otherwise add its own timeouts to every hop)."""
    try:
        ipaddress.ip_address(host)
        literal = True
    except ValueError:
        literal = False
    try:
        if literal:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        else:
            timeout = clamp(
                settings.GARDEN_EGRESS_DNS_TIMEOUT,
                httpcore.ConnectTimeout,
            )
            infos = (resolver or RESOLVER).resolve(
                host,
                port,
                purpose=purpose,
                owner_id=current_owner() if owner_id is None else owner_id,
                timeout=timeout,
            )
    except (socket.gaierror, UnicodeError) as exc:
        raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
    seen: dict[Address, None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        seen[ipaddress.ip_address(sockaddr[0].split("%", 1)[0])] = None
    return list(seen)


# What an allowed *name* may still not resolve to unless the address itself is allowed: the
# machine garden runs on, and the metadata services that hand out its cloud credentials.
_NEVER_BY_NAME = (
    "a cloud metadata address",
    "a loopback address",
    "an unspecified address",
    "a link-local address",
)
_NAME_NEVER = "a loopback, link-local or metadata address"


def check_host(host: str, port: int, purpose: Purpose) -> list[Address]:
    """The addresses a connection to ``host`` may use; raises EgressRefused when the host
    resolves to any address the policy refuses (a mixed answer is refused whole). A host the
    allowlist names may resolve to private addresses, but not to loopback, link-local or
    metadata ones unless the allowlist holds that address too."""
    allow = allowlist_for(purpose)
    host = host.strip("[]")
    named = allow.names(host, port)
    name = host.lower().rstrip(".")
    if not named and (name == "localhost" or name.endswith(".localhost")):
        # RFC 6761: always loopback, whatever a resolver says (or fails to say).
        raise EgressRefused(
            f"{host} is a loopback name; garden does not connect there unless "
            f"the operator allows it ({_setting_for(purpose)}).",
            destination=True,
        )
    addresses = resolve(host, port, purpose=purpose)
    for address in addresses:
        reason = refusal_reason(address)
        if not reason or allow.holds(address, port):
            continue
        if named and reason not in _NEVER_BY_NAME:
            continue
        if host == str(address):
            leads = f"{host} is {reason}"  # the owner wrote the address
        else:
            # What an internal name resolves to is the operator's to know, not the owner's.
            logger.info(
                "egress refused: %s resolved to %s, %s (%s)", host, address, reason, purpose
            )
            leads = (
                f"{host} leads to {_NAME_NEVER}"
                if named
                else f"{host} leads to a loopback, private, link-local or metadata address"
            )
        if named:
            raise EgressRefused(
                f"{leads}; the operator allows the name {host}, not that address "
                f"(an address is allowed only by naming it in {_setting_for(purpose)}).",
                destination=True,
            )
        raise EgressRefused(
            f"{leads}; garden does not connect there unless the operator "
            f"allows it ({_setting_for(purpose)}).",
            destination=True,
        )
    return addresses


def _setting_for(purpose: Purpose) -> str:
    return {
        "provider": "GARDEN_EGRESS_ALLOW_PROVIDERS",
        "telegram": "GARDEN_EGRESS_ALLOW_TELEGRAM",
        "mcp": "GARDEN_EGRESS_ALLOW_MCP",
        "mcp_site": "GARDEN_MCP_SERVERS",
        "webhook": "GARDEN_EGRESS_ALLOW_WEBHOOK",
    }.get(purpose, "GARDEN_EGRESS_ALLOW")


def check_url(url: str, purpose: Purpose) -> None:
    """Refuse ``url`` early (when an owner saves it, before a fetch) if its host is a literal
    address the policy refuses, or ``localhost``. Other names are not resolved here: every
    connection checks them again, which is what protects."""
    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https"):
        raise EgressRefused(f"{parsed.scheme or 'this'} URLs are not fetched; use http or https.")
    if parsed.userinfo:
        raise EgressRefused("the URL may not carry a user name or password.")
    if purpose == "provider" and (parsed.query or parsed.fragment or "?" in url or "#" in url):
        raise EgressRefused("a base URL has no query or fragment.")
    host = parsed.host
    if not host:
        raise EgressRefused("the URL has no host.")
    try:
        ipaddress.ip_address(host)
        literal = True
    except ValueError:
        literal = False
    name = host.lower().rstrip(".")
    if literal or name == "localhost" or name.endswith(".localhost"):
        try:
            check_host(host, parsed.port or (443 if parsed.scheme == "https" else 80), purpose)
        except httpcore.ConnectError:
            if literal:
                raise
            # An unresolvable name is not refused here; the connection will say so.
