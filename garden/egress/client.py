"""The httpx clients of the egress policy: connections only to checked addresses, every read
and write within the current deadline, no cookies, and bodies read up to a cap."""

from __future__ import annotations

import http.cookiejar
import os
import threading
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpcore
import httpx
from django.conf import settings

from garden.db_release import check_no_connection_held
from garden.egress.deadline import clamp
from garden.egress.policy import EgressRefused, Purpose, check_host


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose reads and writes never wait past the current request's deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            self._stream.start_tls(
                ssl_context, server_hostname, clamp(timeout, httpcore.ConnectTimeout)
            )
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class EgressBackend(httpcore.NetworkBackend):
    """Connects only to addresses the policy allows, to exactly the address it checked."""

    def __init__(self, purpose: Purpose) -> None:
        self.purpose = purpose
        self._tcp = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        check_no_connection_held()
        addresses = check_host(host, port, self.purpose)
        error: Exception | None = None
        for address in addresses:
            try:
                stream = self._tcp.connect_tcp(
                    str(address),
                    port,
                    clamp(timeout, httpcore.ConnectTimeout),
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
                continue
            return _DeadlineStream(stream)
        raise error or httpcore.ConnectError(f"no address for {host!r}")

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        raise EgressRefused("unix sockets are not an egress destination.")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def build_client(
    purpose: Purpose,
    *,
    verify: Any = True,
    follow_redirects: bool = False,
    max_redirects: int = 5,
    keepalive_expiry: float = 5.0,
) -> httpx.Client:
    """An httpx client whose every connection passes the egress policy for ``purpose``.

    - It keeps no cookies: one process's client serves every owner, and nothing a server sets
      for one owner's request may ride along with another's.
    - It asks for bodies unencoded; one sent packed anyway (gzip or deflate, one layer) is
      unpacked by its transport (``UnpackingTransport``) in bounded pieces, at most
      GARDEN_EGRESS_MAX_DECODED_BYTES a response, and any other encoding is refused by name:
      a few hundred bytes of gzip can unpack to gigabytes.
    - Environment proxies are ignored (``trust_env=False``): a proxy would be the address
      checked, not the destination.
    """
    no_cookies = http.cookiejar.CookieJar(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
    transport = httpx.HTTPTransport(verify=verify)
    # httpx builds its pool without a way to pass a network backend; the pool is rebuilt with
    # the same SSL context and ours. (httpx is pinned; the attribute is stable in 0.28.)
    ssl_context = transport._pool._ssl_context
    transport._pool = httpcore.ConnectionPool(
        ssl_context=ssl_context,
        max_connections=None,
        max_keepalive_connections=64,
        keepalive_expiry=keepalive_expiry,
        http1=True,
        http2=False,
        network_backend=EgressBackend(purpose),
    )
    return httpx.Client(
        transport=UnpackingTransport(transport),
        follow_redirects=follow_redirects,
        max_redirects=max_redirects,
        trust_env=False,
        cookies=no_cookies,
        headers={"Accept-Encoding": "identity"},
    )


class ReadBudget:
    """How many bytes the connections of one async client may read in all; past it, the read
    raises ``BodyTooLarge`` and ``exceeded`` says so (a caller may cancel its work at once with
    ``on_exceeded``)."""

    def __init__(self, max_bytes: int, on_exceeded: Any = None) -> None:
        self.left = max_bytes
        self.max_bytes = max_bytes
        self.exceeded = False
        self.on_exceeded = on_exceeded

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            self.exceeded = True
            if self.on_exceeded is not None:
                self.on_exceeded()
            raise BodyTooLarge(f"more than {self.max_bytes:,} bytes were sent back.")


class BodyTooLarge(httpcore.ReadError):
    """A read past a ``ReadBudget``."""


class _AsyncDeadlineStream(httpcore.AsyncNetworkStream):
    """The async twin of ``_DeadlineStream``; its reads also count against a ``ReadBudget``."""

    def __init__(self, stream: httpcore.AsyncNetworkStream, budget: ReadBudget | None) -> None:
        self._stream = stream
        self._budget = budget

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = await self._stream.read(max_bytes, clamp(timeout, httpcore.ReadTimeout))
        if self._budget is not None:
            self._budget.spend(len(data))
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._stream.write(buffer, clamp(timeout, httpcore.WriteTimeout))

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        return _AsyncDeadlineStream(
            await self._stream.start_tls(
                ssl_context, server_hostname, clamp(timeout, httpcore.ConnectTimeout)
            ),
            self._budget,
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class AsyncEgressBackend(httpcore.AsyncNetworkBackend):
    """``EgressBackend`` for async clients (the MCP SDK's): the same check of every address
    before a connection, to exactly the address checked, within the same deadline."""

    def __init__(self, purpose: Purpose, budget: ReadBudget | None = None) -> None:
        self.purpose = purpose
        self.budget = budget
        self._tcp = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        # The check resolves on the policy's own bounded threads; this event loop serves one
        # call only, so waiting here blocks no one else's work.
        check_no_connection_held()
        addresses = check_host(host, port, self.purpose)
        error: Exception | None = None
        for address in addresses:
            try:
                stream = await self._tcp.connect_tcp(
                    str(address),
                    port,
                    clamp(timeout, httpcore.ConnectTimeout),
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
                continue
            return _AsyncDeadlineStream(stream, self.budget)
        raise error or httpcore.ConnectError(f"no address for {host!r}")

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        raise EgressRefused("unix sockets are not an egress destination.")

    async def sleep(self, seconds: float) -> None:
        await self._tcp.sleep(seconds)


def build_async_client(
    purpose: Purpose, *, budget: ReadBudget | None = None, headers: dict[str, str] | None = None
) -> httpx.AsyncClient:
    """An async httpx client with ``build_client``'s rules (checked addresses, no cookies, no
    environment proxies, no redirects followed, packed bodies unpacked bounded), every byte
    it reads counted against ``budget``, and every byte it unpacks too (the SDK reading it
    reads the unpacked body). One per piece of work: the budget is the work's."""
    no_cookies = http.cookiejar.CookieJar(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
    transport = httpx.AsyncHTTPTransport()
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=transport._pool._ssl_context,
        max_connections=4,
        max_keepalive_connections=4,
        keepalive_expiry=5.0,
        http1=True,
        http2=False,
        network_backend=AsyncEgressBackend(purpose, budget),
    )
    return httpx.AsyncClient(
        transport=AsyncUnpackingTransport(transport, budget),
        # No per-phase timeout of httpx's own (5 s by default): the work's deadline bounds
        # every connect, read and write (``clamp``), however long the work may take.
        timeout=httpx.Timeout(None),
        follow_redirects=False,
        trust_env=False,
        cookies=no_cookies,
        headers={"Accept-Encoding": "identity", **(headers or {})},
    )


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


_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}

# The most bytes one step of unpacking gives at once: what a reader holds of an unpacked body
# beyond what it keeps, whatever the body's ratio (gzip packs zeros about a thousand to one).
UNPACK_PIECE = 64 * 1024


class EncodingRefused(EgressRefused):
    """A response sent in an encoding garden does not unpack (anything but one layer of gzip
    or deflate), or whose packed body is corrupt; raised when its body is read, so a caller
    that reads only the status (a webhook's) is not refused."""

    code = "RESPONSE_ENCODING_REFUSED"


class DecodedTooLarge(EgressRefused):
    """A packed response that unpacked past GARDEN_EGRESS_MAX_DECODED_BYTES (or the byte cap
    the reader gave); unpacking stopped there."""

    code = "RESPONSE_TOO_LARGE"


def _encoding(headers: httpx.Headers) -> str:
    """The body's one encoding ('' for none), or ``EncodingRefused``'s reason as ``!...``."""
    encodings = [
        e.strip().lower()
        for e in headers.get("content-encoding", "").split(",")
        if e.strip() and e.strip().lower() != "identity"
    ]
    if len(encodings) > 1 or (encodings and encodings[0] not in _DECODERS):
        return "!" + ", ".join(encodings)
    return encodings[0] if encodings else ""


class _Unpacker:
    """One packed body unpacked by zlib in pieces of at most UNPACK_PIECE bytes, never more
    than ``ceiling`` bytes in all, each piece also spent from ``budget`` (the async client's
    ``ReadBudget``: the bytes unpacked count beside the bytes read off the wire)."""

    def __init__(self, encoding: str, ceiling: int, budget: ReadBudget | None = None) -> None:
        if encoding.startswith("!"):
            raise EncodingRefused(
                f"the response is encoded as {encoding[1:]}, which garden does not unpack "
                "(one layer of gzip or deflate at most)."
            )
        self.encoding = encoding
        self.ceiling = ceiling
        self.size = 0
        self.budget = budget
        self._zlib = zlib.decompressobj(_DECODERS[encoding])

    def feed(self, data: bytes) -> Iterator[bytes]:
        """What ``data`` unpacks to, piece by piece; ``b""`` drains what zlib still holds."""
        while not self._zlib.eof:
            try:
                piece = self._zlib.decompress(data, UNPACK_PIECE)
            except zlib.error as exc:
                raise EncodingRefused(f"the response's {self.encoding} body is corrupt.") from exc
            data = self._zlib.unconsumed_tail
            if piece:
                self.size += len(piece)
                if self.size > self.ceiling:
                    raise DecodedTooLarge(
                        f"the response unpacks to more than {self.ceiling:,} bytes; "
                        "it was not read further."
                    )
                if self.budget is not None:
                    self.budget.spend(len(piece))
                yield piece
            # A full piece may leave output inside zlib even with no input left.
            if not data and len(piece) < UNPACK_PIECE:
                return


def _ceiling() -> int:
    return settings.GARDEN_EGRESS_MAX_DECODED_BYTES


def _strip_encoding(response: httpx.Response) -> str:
    """Take the encoding headers off ``response`` (httpx would otherwise unpack the body again,
    without bound) and return its encoding as ``_encoding`` names it."""
    encoding = _encoding(response.headers)
    if "content-encoding" in response.headers:
        del response.headers["content-encoding"]
        # The length was the packed body's.
        if "content-length" in response.headers:
            del response.headers["content-length"]
    return encoding


class _UnpackedStream(httpx.SyncByteStream):
    def __init__(self, raw: Any, encoding: str, ceiling: int) -> None:
        self._raw = raw
        self._encoding = encoding
        self._ceiling = ceiling

    def __iter__(self) -> Iterator[bytes]:
        unpacker = _Unpacker(self._encoding, self._ceiling)
        for chunk in self._raw:
            yield from unpacker.feed(chunk)
        yield from unpacker.feed(b"")

    def close(self) -> None:
        close = getattr(self._raw, "close", None)
        if close is not None:
            close()


class _AsyncUnpackedStream(httpx.AsyncByteStream):
    def __init__(self, raw: Any, encoding: str, ceiling: int, budget: ReadBudget | None) -> None:
        self._raw = raw
        self._encoding = encoding
        self._ceiling = ceiling
        self._budget = budget

    async def __aiter__(self) -> AsyncIterator[bytes]:
        unpacker = _Unpacker(self._encoding, self._ceiling, self._budget)
        async for chunk in self._raw:
            for piece in unpacker.feed(chunk):
                yield piece
        for piece in unpacker.feed(b""):
            yield piece

    async def aclose(self) -> None:
        await self._raw.aclose()


class UnpackingTransport(httpx.BaseTransport):
    """An egress client's transport: a body sent gzip- or deflate-packed (though the client
    asks for none) is unpacked here, bounded (``_Unpacker``), and reaches httpx with its
    encoding header gone, so no read path (``read()``, ``json()``, ``iter_bytes()``) unpacks
    it again; any other encoding is refused when the body is read."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        encoding = _strip_encoding(response)
        if encoding:
            response.stream = _UnpackedStream(response.stream, encoding, _ceiling())
        return response

    def close(self) -> None:
        self.inner.close()


class AsyncUnpackingTransport(httpx.AsyncBaseTransport):
    """``UnpackingTransport`` for async clients; what it unpacks is spent from the client's
    ``ReadBudget`` too."""

    def __init__(self, inner: httpx.AsyncBaseTransport, budget: ReadBudget | None) -> None:
        self.inner = inner
        self.budget = budget

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        encoding = _strip_encoding(response)
        if encoding:
            response.stream = _AsyncUnpackedStream(
                response.stream, encoding, _ceiling(), self.budget
            )
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """Up to ``max_bytes`` of the body of a streamed response, and whether more was left
    unread; the connection is closed rather than drained."""
    body = b"".join(iter_capped(response, max_bytes))
    return body[:max_bytes], len(body) > max_bytes


def iter_capped(response: httpx.Response, max_bytes: int) -> Iterator[bytes]:
    """The body of a streamed response as it arrives, past ``max_bytes`` by at most one piece
    (so a caller that counts can tell a body past the cap), then no more. An egress client's
    transport has already unpacked a packed body, bounded; a response that still says it is
    packed (not from an egress client) is unpacked here the same way, up to the cap."""
    chunks: Any = response.iter_raw()
    if "content-encoding" in response.headers:
        chunks = _UnpackedStream(chunks, _encoding(response.headers), max_bytes + UNPACK_PIECE)
    size = 0
    for chunk in chunks:
        size += len(chunk)
        yield chunk
        if size > max_bytes:
            return
