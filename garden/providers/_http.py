"""Transport and failure classification shared by the HTTP adapters (OpenAI, Anthropic).

Each adapter supplies only its wire mapping; posting, timeouts, reading a streamed reply's
server-sent events and turning every way a call can fail into a ProviderError subclass live
here once.
"""

from __future__ import annotations

import base64
import email.utils
import functools
import json
import socket
import ssl
import time
from collections.abc import Iterable
from typing import Any, TypeVar

import httpx
from django.conf import settings

from garden import egress

from .types import (
    AccountConfig,
    AmbiguousFailure,
    ArtifactRef,
    ChatReply,
    ChatRequest,
    ConfirmedRejection,
    EgressRefusedError,
    MalformedReply,
    ProviderAuthFailed,
    ProviderConfigError,
    ProviderConnectionLost,
    ProviderConnectTimeout,
    ProviderError,
    ProviderNameNotFound,
    ProviderNotFound,
    ProviderRateLimited,
    ProviderServerError,
    ProviderTimeout,
    ProviderTlsFailed,
    ProviderUnreachable,
    ReplyTooLarge,
    TextBlock,
    TextSink,
    ToolCall,
    ToolSpec,
)

T = TypeVar("T")

# What decoding or mapping a provider's JSON can raise besides ValueError: nesting deeper than
# the parser's recursion limit, or a value of a type the mapping did not expect. Each is a
# MalformedReply, never an exception that escapes the step (whose redelivery would call the
# same server again).
_DECODING_ERRORS = (RecursionError, ValueError, TypeError, KeyError, IndexError, AttributeError)

# 4xx answers the provider gives without running the model. Any other 4xx is treated as
# ambiguous, because an unknown status is not proof that no work was done.
REJECTION_STATUSES = frozenset({400, 401, 403, 404, 409, 413, 422, 429})

# How much of an error body to keep in the exception message: enough to read the provider's
# explanation, not enough to flood logs.
_ERROR_SNIPPET = 500


def reply_limit(max_tokens: int) -> int:
    """The most characters (text, tool names and arguments) a reply to a call that asked for
    ``max_tokens`` may carry: GARDEN_REPLY_CHARS_PER_TOKEN a token (a token is about four
    characters of prose; twice that leaves room for code and other scripts) plus
    GARDEN_REPLY_SLACK_CHARS for tool-call JSON, and never more than
    GARDEN_PROVIDER_MAX_REPLY_BYTES. A server the owner points anywhere cannot make a worker
    read, hold or push more than this for one call."""
    derived = max(1, max_tokens) * settings.GARDEN_REPLY_CHARS_PER_TOKEN
    return min(
        derived + settings.GARDEN_REPLY_SLACK_CHARS, settings.GARDEN_PROVIDER_MAX_REPLY_BYTES
    )


def reply_size(reply: ChatReply) -> int:
    """A reply's characters as ``reply_limit`` counts them."""
    size = 0
    for block in reply.content:
        if isinstance(block, TextBlock):
            size += len(block.text)
        elif isinstance(block, ToolCall):
            size += len(block.name) + len(json.dumps(block.arguments))
    return size


def wire_cap(limit: int) -> int:
    """The most bytes read off the wire for a reply of at most ``limit`` characters:
    GARDEN_REPLY_WIRE_BYTES_PER_CHAR a character (a streamed token comes wrapped in an event of a
    few hundred bytes, and events that carry no text count only here), never more than
    GARDEN_PROVIDER_MAX_REPLY_BYTES."""
    return min(
        limit * settings.GARDEN_REPLY_WIRE_BYTES_PER_CHAR, settings.GARDEN_PROVIDER_MAX_REPLY_BYTES
    )


class StreamAssembler:
    """Builds one reply from a stream's events, in the shape the non-streamed call returns, so
    the adapter's ``_parse`` reads both and a streamed call gives the same ChatReply. Text
    deltas go to ``on_text`` as they come; every piece is counted first (``grow``), so the
    stream is cut, named REPLY_TOO_LARGE, as soon as it passes the call's ``limit``."""

    def __init__(self, on_text: TextSink) -> None:
        self.on_text = on_text
        # Whether any event came: a server that ignores ``stream`` answers in one piece.
        self.fed = False
        self.size = 0
        self.limit: int | None = None
        self.provider = ""

    def grow(self, piece: str) -> None:
        """Count ``piece`` (text, a tool name or arguments) against the call's limit, before
        it is kept or shown; past the limit the reply is ReplyTooLarge."""
        self.size += len(piece)
        if self.limit is not None and self.size > self.limit:
            raise ReplyTooLarge(
                f"{self.provider}: the streamed reply passed {self.limit:,} characters, the "
                f"most this call allows; reading stopped there"
            )

    def feed(self, event: str, data: Any) -> bool:
        """Take one event (its name, and its JSON data decoded, or ``"[DONE]"``); True once
        the reply is whole."""
        raise NotImplementedError

    def data(self) -> dict[str, Any]:
        """The reply in the non-streamed shape; MalformedReply if the stream never finished."""
        raise NotImplementedError


class HttpProvider:
    """An adapter over the process's shared ``httpx.Client``; subclasses map requests and
    replies.

    Subclasses set ``name`` and ``default_base_url`` and implement ``_url``, ``_headers``,
    ``_body`` and ``_parse``, and for streaming ``_stream_fields`` and ``_assembler``.
    """

    name = "http"
    default_base_url = ""
    # What the adapter can send a model as content parts beside text (see ``inline``).
    media_types: frozenset[str] = frozenset()

    def __init__(self, config: AccountConfig) -> None:
        if not config.model:
            raise ProviderConfigError(f"{self.name} account has no model")
        self.config = config
        self.base_url = (config.base_url or self.default_base_url).rstrip("/")
        self.timeout = config.timeout
        self.media = self.media_types if carries_media(config.options) else frozenset()

    def complete(self, request: ChatRequest, *, on_text: TextSink | None = None) -> ChatReply:
        """One model call. With ``on_text`` the reply is streamed: each piece of its text is
        handed to ``on_text`` as it is generated (their concatenation is the reply's text), and
        the reply returned is the one the same call would give unstreamed."""
        names = ToolNames(request.tools)
        body = self._body(request, names)
        assembler: StreamAssembler | None = None
        limit = reply_limit(request.max_tokens)
        if on_text is not None:
            body = {**body, **self._stream_fields()}
            assembler = self._assembler(on_text)
            assembler.limit, assembler.provider = limit, self.name
        try:
            data = post_json(
                shared_client(),
                self._url(),
                self._headers(),
                body,
                provider=self.name,
                timeout=self.timeout,
                cap=wire_cap(limit),
                owner_id=self.config.owner_id,
                assembler=assembler,
            )
        except ProviderError as exc:
            redact(exc, self.config.api_key)
            raise
        try:
            reply = self._parse(data, names)
        except _DECODING_ERRORS as exc:
            # A shape the wire mapping did not expect (or nesting past the parser's depth):
            # the server answered, just not a reply. Final, like every malformed reply.
            raise MalformedReply(f"{self.name}: the reply cannot be read: {exc!r:.200}") from exc
        if (size := reply_size(reply)) > limit:
            raise ReplyTooLarge(
                f"{self.name}: the reply carries {size:,} characters; this call allows {limit:,}"
            )
        if assembler is not None and not assembler.fed and reply.text:
            # A server that ignored ``stream`` answered in one piece: its text is one delta.
            assembler.on_text(reply.text)
        return reply

    def close(self) -> None:
        """Nothing to release: connections belong to the process's shared client."""

    def __enter__(self) -> HttpProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _url(self) -> str:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _body(self, request: ChatRequest, names: ToolNames) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, data: dict[str, Any], names: ToolNames) -> ChatReply:
        raise NotImplementedError

    def _stream_fields(self) -> dict[str, Any]:
        """What the request body adds to ask for a streamed reply."""
        return {"stream": True}

    def _assembler(self, on_text: TextSink) -> StreamAssembler:
        raise NotImplementedError


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default verifying context, built once per process: loading the CA bundle costs
    ~18 ms of CPU, which per model call was more than the whole step's orchestration. An
    SSLContext is safe to share between threads."""
    return httpx.create_ssl_context()


def shared_client() -> httpx.Client:
    """The process's one ``httpx.Client`` for model calls, built on the egress policy (a
    base URL at a loopback, private or metadata address is refused unless the operator allows
    it). Its pool keeps connections to each provider open between calls, so a call does not
    pay a new TCP and TLS handshake; it is safe to share between threads, and a forked child
    builds its own.

    - Idle connections are dropped after 4 s, before servers that close idle connections at
      5 s (uvicorn, as under vLLM; Node) can close one just as a call is sent on it.
    - It keeps no cookies: calls of different accounts and owners share it, and nothing one
      provider answer sets may ride along with another's call.
    - It never follows redirects: a provider answers where it was asked.
    """
    return egress.shared(
        "provider",
        lambda: egress.build_client("provider", verify=_tls_context(), keepalive_expiry=4.0),
    )


def post_json(
    client: httpx.Client,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    *,
    provider: str,
    timeout: float,
    owner_id: int | None = None,
    assembler: StreamAssembler | None = None,
    cap: int | None = None,
) -> dict[str, Any]:
    """POST ``body`` and return the decoded JSON object, or raise the classified ProviderError.

    With ``assembler``, a 2xx ``text/event-stream`` answer is read event by event into it and
    its reply returned; any other answer is read as without it (an error status is classified
    the same way, and a server that ignores ``stream`` is read as one JSON body).

    ``timeout`` bounds the whole call (connect, send, wait, read), not each phase; the reply
    is read up to ``cap`` bytes (GARDEN_PROVIDER_MAX_REPLY_BYTES unless given), and no further.
    """
    cap = settings.GARDEN_PROVIDER_MAX_REPLY_BYTES if cap is None else cap
    try:
        with (
            egress.deadline(timeout, owner_id=owner_id),
            client.stream(
                "POST", url, headers=headers, json=body, timeout=httpx.Timeout(timeout)
            ) as response,
        ):
            status = response.status_code
            if assembler is not None and 200 <= status < 300 and _is_event_stream(response):
                return read_events(response, cap, provider, assembler)
            raw, clipped = egress.read_capped(response, cap)
    except egress.EgressRefused as exc:
        raise EgressRefusedError(f"{provider}: {exc.message}") from exc
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        raise ProviderConfigError(f"{provider}: unusable base URL {url!r}: {exc}") from exc
    except UnicodeError:
        # A header (the key) that is not ASCII: nothing was sent.
        raise ProviderConfigError(
            f"{provider}: the account's key or a header is not ASCII text"
        ) from None
    except httpx.HTTPError as exc:
        raise classify_exception(exc, provider) from exc
    if clipped:
        raise ReplyTooLarge(
            f"{provider}: HTTP {status} reply is larger than {cap} bytes", status=status
        )
    check_status(status, response.headers, raw, provider)
    try:
        data = json.loads(raw)
    # JSONDecodeError and UnicodeDecodeError are ValueErrors; deep nesting is a RecursionError.
    except (ValueError, RecursionError) as exc:
        raise MalformedReply(
            f"{provider}: HTTP {status} body is not JSON: {_snippet(raw)}",
            status=status,
        ) from exc
    if not isinstance(data, dict):
        raise MalformedReply(
            f"{provider}: reply is JSON {type(data).__name__}, expected an object",
            status=status,
        )
    return data


def _is_event_stream(response: httpx.Response) -> bool:
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return media == "text/event-stream"


def read_events(
    response: httpx.Response, cap: int, provider: str, assembler: StreamAssembler
) -> dict[str, Any]:
    """Feed a 2xx event stream to ``assembler`` until it has the whole reply.

    The stream ending first or an event whose data is not JSON is a MalformedReply, more than
    ``cap`` bytes (or more than the assembler's limit) a ReplyTooLarge, and reading stops there:
    the caller's ``with`` closes the connection unread; a transport error on the way is raised as httpx's, for the caller to
    classify. Either way the model may have run, so every failure here is ambiguous.
    """
    status = response.status_code
    parser = EventStream()
    size = 0
    for chunk in egress.iter_capped(response, cap):
        size += len(chunk)
        if size > cap:
            raise ReplyTooLarge(
                f"{provider}: streamed reply is larger than {cap} bytes", status=status
            )
        for event, data in parser.feed(chunk):
            if _feed(assembler, event, data, provider, status):
                return assembler.data()
    for event, data in parser.close():
        if _feed(assembler, event, data, provider, status):
            return assembler.data()
    return assembler.data()


def _feed(assembler: StreamAssembler, event: str, data: str, provider: str, status: int) -> bool:
    assembler.fed = True
    if data == "[DONE]":
        return assembler.feed(event, data)
    try:
        decoded = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise MalformedReply(
            f"{provider}: a streamed event is not JSON: {data[:200]!r}", status=status
        ) from exc
    try:
        return assembler.feed(event, decoded)
    except _DECODING_ERRORS as exc:
        raise MalformedReply(
            f"{provider}: a streamed event cannot be read: {exc!r:.200}", status=status
        ) from exc


class EventStream:
    """Server-sent events parsed from the bytes of a response as they arrive: each complete
    event as ``(name, data)`` (name ``message`` unless the event says otherwise; ``data``
    lines joined by newlines). Comments and unknown fields are skipped; a line that is not
    UTF-8 is a MalformedReply."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        self._buffer += chunk
        events: list[tuple[str, str]] = []
        start = 0
        while (end := self._buffer.find(b"\n", start)) >= 0:
            event = self._line(bytes(self._buffer[start:end]))
            if event is not None:
                events.append(event)
            start = end + 1
        del self._buffer[:start]
        return events

    def close(self) -> list[tuple[str, str]]:
        """The events still held when the stream ends (a last line with no newline after it,
        an event with no blank line after it)."""
        tail, self._buffer = bytes(self._buffer), bytearray()
        events = [event for event in (self._line(tail), self._line(b"")) if event is not None]
        return events

    def _line(self, raw: bytes) -> tuple[str, str] | None:
        try:
            line = raw.rstrip(b"\r").decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedReply(f"a streamed line is not UTF-8: {raw[:100]!r}") from exc
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = (self._event or "message", "\n".join(self._data))
            self._event, self._data = "", []
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        return None


def classify_exception(exc: httpx.HTTPError, provider: str) -> Exception:
    """Map a transport exception to a ProviderError, by whether the request could have run."""
    # ConnectTimeout is a TimeoutException too, so it must be tested before the timeout branch:
    # a connection that never opened carried no request.
    if isinstance(exc, httpx.ConnectTimeout):
        return ProviderConnectTimeout(f"{provider}: could not connect in time: {exc!r}")
    if isinstance(exc, httpx.ConnectError):
        return _connect_failure(exc)(f"{provider}: could not connect: {exc!r}")
    if isinstance(exc, httpx.TimeoutException):
        return ProviderTimeout(f"{provider}: timed out: {exc!r}")
    if isinstance(exc, (httpx.NetworkError, httpx.RemoteProtocolError)):
        return ProviderConnectionLost(f"{provider}: connection lost: {exc!r}")
    return AmbiguousFailure(f"{provider}: transport failure: {exc!r}")


def _connect_failure(exc: httpx.ConnectError) -> type[ConfirmedRejection]:
    """Which refusal a connection that never carried a request was, from its causes."""
    chain, cause = [], exc
    while cause is not None and len(chain) < 10:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    if any(isinstance(c, ssl.SSLError) for c in chain) or "SSL" in str(exc):
        return ProviderTlsFailed
    if any(isinstance(c, socket.gaierror) for c in chain) or "cannot resolve" in str(exc):
        return ProviderNameNotFound
    return ProviderUnreachable


def check_status(status: int, headers: httpx.Headers, body: bytes, provider: str) -> None:
    """Raise the ProviderError for a non-2xx response; return quietly for a 2xx."""
    if 200 <= status < 300:
        return
    message = f"{provider}: HTTP {status}: {_snippet(body)}"
    if status == 429:
        raise ProviderRateLimited(message, status=status, retry_after=parse_retry_after(headers))
    if status in (401, 403):
        raise ProviderAuthFailed(message, status=status)
    if status == 404:
        raise ProviderNotFound(message, status=status)
    if status in REJECTION_STATUSES:
        raise ConfirmedRejection(message, status=status)
    if status >= 500:
        raise ProviderServerError(message, status=status)
    # 408 and any other status (unknown 4xx, a redirect we do not follow) lands here.
    raise AmbiguousFailure(message, status=status)


def parse_retry_after(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def redact(exc: BaseException, secret: str) -> None:
    """Blank ``secret`` out of ``exc``'s message in place: an error body that echoes the key
    must not carry it into logs, notices or the account test."""
    if secret and any(secret in str(arg) for arg in exc.args):
        exc.args = tuple(str(arg).replace(secret, "[redacted]") for arg in exc.args)


def _snippet(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace").strip().replace("\n", " ")
    return text[:_ERROR_SNIPPET] or "<empty body>"


# --- wire helpers shared by the adapters ----------------------------------------------------


class ToolNames:
    """Maps tool names to wire names and back; both providers forbid ``.`` in tool names.

    ``.`` becomes ``__`` on the wire. Names declared in the request map back exactly, so a
    declared ``a__b`` stays ``a__b``; an undeclared name from the model maps ``__`` to ``.``.
    """

    def __init__(self, tools: Iterable[ToolSpec] = ()) -> None:
        self._from_wire: dict[str, str] = {}
        for spec in tools:
            wire = to_wire_name(spec.name)
            other = self._from_wire.setdefault(wire, spec.name)
            if other != spec.name:
                raise ValueError(f"tool names {other!r} and {spec.name!r} collide on the wire")

    def to_wire(self, name: str) -> str:
        return to_wire_name(name)

    def from_wire(self, wire: str) -> str:
        return self._from_wire.get(wire) or from_wire_name(wire)


def to_wire_name(name: str) -> str:
    return name.replace(".", "__")


def from_wire_name(wire: str) -> str:
    return wire.replace("__", ".")


def artifact_line(ref: ArtifactRef) -> str:
    """The one-line text a model sees for an artifact; a picture or PDF carried as a content
    part follows its line, so the model knows which artifact it is looking at."""
    return f"[artifact {ref.artifact_id} ({ref.kind}): {ref.title}]"


def carries_media(options: dict[str, Any] | None) -> bool:
    """Whether an account may be sent pictures and PDFs at all: ``"images": false`` in its
    options says its model reads text only (a local text model)."""
    return (options or {}).get("images", True) is not False


def inline(ref: ArtifactRef, media_types: frozenset[str]) -> bool:
    """Whether ``ref`` goes to the model as a content part: its bytes were loaded and the
    adapter (and the account) carry its media type."""
    return ref.data is not None and ref.media_type in media_types


def base64_data(ref: ArtifactRef) -> str:
    return base64.b64encode(ref.data or b"").decode("ascii")


def require(obj: Any, key: str, kind: type[T], where: str) -> T:
    """``obj[key]`` checked to be a ``kind``; anything else is a MalformedReply."""
    if not isinstance(obj, dict):
        raise MalformedReply(f"{where}: expected an object, got {type(obj).__name__}")
    value = obj.get(key)
    # bool is an int subclass; a token count of True is as malformed as a missing one.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise MalformedReply(f"{where}: field {key!r} missing or not {kind.__name__}")
    return value


def count(obj: Any, *keys: str) -> int:
    """Sum of the integer token counts under ``keys``; absent or odd values count as zero.

    Usage is bookkeeping, not the answer: a server that omits it still produced a reply.
    """
    if not isinstance(obj, dict):
        return 0
    total = 0
    for key in keys:
        value = obj.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            total += value
    return total


def parse_arguments(raw: Any, where: str) -> dict[str, Any]:
    """Tool-call arguments as a dict, from a JSON string (or an object some servers send)."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if not isinstance(raw, str):
        raise MalformedReply(f"{where}: arguments are {type(raw).__name__}, expected JSON text")
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise MalformedReply(f"{where}: arguments are not valid JSON: {raw[:200]!r}") from exc
    if not isinstance(value, dict):
        raise MalformedReply(f"{where}: arguments decode to {type(value).__name__}, not an object")
    return value
