"""Transport shared by the HTTP adapters (OpenAI, Anthropic): the process's one client on the
egress policy, posting within a deadline and a byte cap, and the bounds of a reply.

Each adapter supplies only its wire mapping (``_wire``); posting and timeouts live here once,
reading a streamed reply in ``_stream`` and naming every way a call can fail in ``_failures``.
"""

from __future__ import annotations

import functools
import json
import ssl
from typing import Any

import httpx
from django.conf import settings

from garden import egress

from ._failures import check_status, classify_exception, redact, snippet
from ._stream import StreamAssembler, is_event_stream, read_events
from ._wire import DECODING_ERRORS, ToolNames, carries_media
from .types import (
    AccountConfig,
    ChatReply,
    ChatRequest,
    EgressRefusedError,
    MalformedReply,
    ProviderConfigError,
    ProviderError,
    ReplyTooLarge,
    TextBlock,
    TextSink,
    ToolCall,
)


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
        except DECODING_ERRORS as exc:
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
    status: int | None = None
    try:
        with (
            egress.deadline(timeout, owner_id=owner_id),
            client.stream(
                "POST", url, headers=headers, json=body, timeout=httpx.Timeout(timeout)
            ) as response,
        ):
            status = response.status_code
            if assembler is not None and 200 <= status < 300 and is_event_stream(response):
                return read_events(response, cap, provider, assembler)
            raw, clipped = egress.read_capped(response, cap)
    except egress.DecodedTooLarge as exc:
        raise ReplyTooLarge(f"{provider}: {exc.message}", status=status) from exc
    except egress.EncodingRefused as exc:
        # The server answered, in a form garden does not unpack: final, like any unreadable
        # reply, and the model may have run.
        raise MalformedReply(f"{provider}: {exc.message}", status=status) from exc
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
            f"{provider}: HTTP {status} body is not JSON: {snippet(raw)}",
            status=status,
        ) from exc
    if not isinstance(data, dict):
        raise MalformedReply(
            f"{provider}: reply is JSON {type(data).__name__}, expected an object",
            status=status,
        )
    return data
