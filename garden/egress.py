"""The egress policy: every outbound HTTP request an owner can direct (a model account's base
URL, ``http.fetch``) goes through one client built here.

- The host is resolved and every address it resolves to is checked before any connection:
  loopback, private, link-local, unique-local, multicast, reserved and cloud metadata
  addresses are refused (IPv4 and IPv6, IPv4-mapped and NAT64/6to4 forms unwrapped), unless
  the operator's allowlist (``GARDEN_EGRESS_ALLOW``, and ``GARDEN_EGRESS_ALLOW_PROVIDERS``
  for model accounts only) names the host or a network holding the address.
- The socket connects to the address that was checked, so there is no window in which a
  second DNS answer (rebinding) could send it elsewhere; TLS still verifies the host name.
- The check runs at every connection, so every redirect hop is checked too.
- Every read and write is bounded by the deadline of the request in progress
  (``deadline()``), so a server dripping one byte at a time cannot hold a worker past it;
  ``read_capped`` stops reading a body at a byte cap.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import httpcore
import httpx
from django.conf import settings

Purpose = Literal["provider", "tool"]
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
    """An outbound request the policy refuses; nothing was sent. ``code`` names it."""

    code = "EGRESS_REFUSED"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BodyTooLarge(Exception):
    """A response body past the byte cap; the rest was not read."""

    code = "RESPONSE_TOO_LARGE"


# --- the policy -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Allowlist:
    """What the operator allows beyond public addresses: host names and networks."""

    hosts: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()
    networks: tuple[Network, ...] = ()

    def names(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return host in self.hosts or any(host.endswith(s) for s in self.suffixes)

    def holds(self, address: Address) -> bool:
        return any(address in net for net in self.networks if net.version == address.version)


def parse_allowlist(entries: Sequence[str]) -> Allowlist:
    """``["10.0.0.0/8", "192.168.1.20", "ollama.internal", "*.corp.example"]``; raises
    ValueError naming a malformed entry."""
    hosts: set[str] = set()
    suffixes: list[str] = []
    networks: list[Network] = []
    for raw in entries:
        entry = raw.strip().lower()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        if entry.startswith("*."):
            suffixes.append(entry[1:].rstrip("."))
        elif all(part.isalnum() or "-" in part for part in entry.rstrip(".").split(".")):
            hosts.add(entry.rstrip("."))
        else:
            raise ValueError(f"not a host name, address or network: {raw!r}")
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
    return _allowlist(entries)


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
        if candidate.is_private:
            return "a private address"
        if candidate.is_reserved or not candidate.is_global:
            return "a reserved or non-public address"
    return None


def resolve(host: str, port: int) -> list[Address]:
    """Every address ``host`` resolves to for a TCP connection, in the resolver's order."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
    seen: dict[Address, None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        seen[ipaddress.ip_address(sockaddr[0].split("%", 1)[0])] = None
    return list(seen)


def check_host(host: str, port: int, purpose: Purpose) -> list[Address]:
    """The addresses a connection to ``host`` may use; raises EgressRefused when the host
    resolves to any address the policy refuses (a mixed answer is refused whole)."""
    allow = allowlist_for(purpose)
    host = host.strip("[]")
    if allow.names(host):
        return resolve(host, port)
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        # RFC 6761: always loopback, whatever a resolver says (or fails to say).
        raise EgressRefused(f"{host} is a loopback name; garden does not connect there unless "
                            f"the operator allows it ({_setting_for(purpose)}).")
    addresses = resolve(host, port)
    for address in addresses:
        reason = refusal_reason(address)
        if reason and not allow.holds(address):
            shown = host if host == str(address) else f"{host} ({address})"
            raise EgressRefused(
                f"{shown} is {reason}; garden does not connect there unless the operator "
                f"allows it ({_setting_for(purpose)})."
            )
    return addresses


def _setting_for(purpose: Purpose) -> str:
    return "GARDEN_EGRESS_ALLOW_PROVIDERS" if purpose == "provider" else "GARDEN_EGRESS_ALLOW"


def check_url(url: str, purpose: Purpose) -> None:
    """Refuse ``url`` early (when an owner saves it, before a fetch) if its host is a literal
    address the policy refuses, or ``localhost``. Other names are not resolved here: every
    connection checks them again, which is what protects."""
    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https"):
        raise EgressRefused(f"{parsed.scheme or 'this'} URLs are not fetched; use http or https.")
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


# --- deadlines ------------------------------------------------------------------------------

_deadline: ContextVar[float | None] = ContextVar("egress_deadline", default=None)


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Bound every connect, read and write of the requests made in this block by a total of
    ``seconds`` (httpx's own timeouts apply per phase, so a slow server could stretch them)."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def _clamp(timeout: float | None, error: type[Exception]) -> float | None:
    end = _deadline.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise error("the request's total time limit passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose reads and writes never wait past the current request's deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(
            ssl_context, server_hostname, _clamp(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class EgressBackend(httpcore.NetworkBackend):
    """Connects only to addresses the policy allows, to exactly the address it checked."""

    def __init__(self, purpose: Purpose) -> None:
        self.purpose = purpose
        self._tcp = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        addresses = check_host(host, port, self.purpose)
        error: Exception | None = None
        for address in addresses:
            try:
                stream = self._tcp.connect_tcp(
                    str(address), port, _clamp(timeout, httpcore.ConnectTimeout),
                    local_address=local_address, socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
                continue
            return _DeadlineStream(stream)
        raise error or httpcore.ConnectError(f"no address for {host!r}")

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        raise EgressRefused("unix sockets are not an egress destination.")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


# --- clients --------------------------------------------------------------------------------


def build_client(purpose: Purpose, *, verify: Any = True, follow_redirects: bool = False,
                 max_redirects: int = 5, keepalive_expiry: float = 5.0,
                 cookies: Any = None) -> httpx.Client:
    """An httpx client whose every connection passes the egress policy for ``purpose``.

    Environment proxies are ignored (``trust_env=False``): a proxy would be the address
    checked, not the destination.
    """
    transport = httpx.HTTPTransport(verify=verify)
    # httpx builds its pool without a way to pass a network backend; the pool is rebuilt with
    # the same SSL context and ours. (httpx is pinned; the attribute is stable in 0.28.)
    ssl_context = transport._pool._ssl_context
    transport._pool = httpcore.ConnectionPool(
        ssl_context=ssl_context, max_connections=None, max_keepalive_connections=64,
        keepalive_expiry=keepalive_expiry, http1=True, http2=False,
        network_backend=EgressBackend(purpose),
    )
    return httpx.Client(transport=transport, follow_redirects=follow_redirects,
                        max_redirects=max_redirects, trust_env=False, cookies=cookies)


_clients: dict[tuple[int, str], httpx.Client] = {}
_clients_lock = threading.Lock()


def shared(purpose: Purpose, factory) -> httpx.Client:
    """The process's one client for ``purpose`` (built by ``factory``); a forked child builds
    its own."""
    key = (os.getpid(), purpose)
    client = _clients.get(key)
    if client is None:
        with _clients_lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = factory()
    return client


def read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """Up to ``max_bytes`` of the (decoded) body of a streamed response, and whether more was
    left unread; the connection is closed rather than drained."""
    parts: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            return b"".join(parts)[:max_bytes], True
    return b"".join(parts), False
