"""Neutral request/reply types shared by every provider adapter.

Providers know two roles, user and assistant. Everything garden sends to a model is expressed
with these frozen dataclasses; each adapter maps them to and from its own wire format, so an
agent's history survives a change of provider between turns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant"]

# Where a streamed call hands each piece of its reply's text as it is generated.
TextSink = Callable[[str], None]


@dataclass(frozen=True)
class TextBlock:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True)
class ToolCall:
    """A tool invocation requested by the model (assistant side)."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True)
class ToolResult:
    """The answer to one ToolCall, sent back on the user side and paired by call id."""

    call_id: str
    content: str
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True)
class ArtifactRef:
    """A reference to a stored artifact (document, chart, picture).

    Stored and projected it is the reference alone. Just before a call the room may fill in
    ``media_type`` and ``data`` (the bytes of an owner's picture or PDF), which an adapter that
    can carry them sends as a content part; any other adapter sends the one-line reference.
    The bytes take no part in comparing or printing a reference.
    """

    artifact_id: str
    kind: str
    title: str
    type: Literal["artifact_ref"] = "artifact_ref"
    media_type: str = ""
    data: bytes | None = field(default=None, compare=False, repr=False)


Block = TextBlock | ToolCall | ToolResult | ArtifactRef


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: tuple[Block, ...]

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: a name, a description and a JSON Schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ChatRequest:
    system: str
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 1024


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class ChatReply:
    content: tuple[Block, ...]
    stop_reason: str = "end_turn"
    usage: Usage = Usage()

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolCall))


@dataclass(frozen=True)
class AccountConfig:
    """What an adapter needs to reach a model; built from a ModelAccount by the caller.

    ``api_key`` is resolved from the account's secret reference at call time and is never
    stored on the account row or returned by the API.
    """

    provider: str
    model: str
    base_url: str = ""
    api_key: str = ""
    timeout: float = 60.0
    options: dict[str, Any] = field(default_factory=dict)
    # The account's owner: the egress policy counts the call's name lookups against them.
    owner_id: int | None = None


# --- failures -------------------------------------------------------------------------------


class ProviderError(Exception):
    """Base of every adapter failure. ``code`` is a stable name for logs and the API;
    ``words`` says what happened to a person, the same on an account's Test and in the room."""

    code = "PROVIDER_ERROR"
    words = "The model call failed."
    # Whether the same call, asked again later, may well succeed (the server was down, slow or
    # busy): the room offers Retry after a request that ended on it; never after a refusal that
    # asking again would meet the same way (a key, a model, an address the site refuses).
    transient = False

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ConfirmedRejection(ProviderError):
    """The provider refused before doing any work (HTTP 429, or a 4xx it answered at once).

    The reservation for this call may be released: no model ran.
    """

    code = "PROVIDER_REJECTED"
    words = "The model server refused the call as it was made."

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


# Each way a call can be refused before any work, by what happened: the budget treats them all
# as a confirmed rejection (the reservation is released), a person reads which one it was.


class ProviderUnreachable(ConfirmedRejection):
    """Nothing answered at the base URL's address: the connection was refused."""

    code = "PROVIDER_UNREACHABLE"
    words = "Nothing is answering at the base URL: is the model server running, on that port?"
    transient = True


class ProviderNameNotFound(ConfirmedRejection):
    code = "PROVIDER_DNS_FAILED"
    words = "The base URL's host name could not be looked up: check its spelling."
    transient = True


class ProviderTlsFailed(ConfirmedRejection):
    code = "PROVIDER_TLS_FAILED"
    words = (
        "The secure connection to the model server failed (its certificate, or https to a "
        "server that speaks http)."
    )


class ProviderConnectTimeout(ConfirmedRejection):
    code = "PROVIDER_CONNECT_TIMEOUT"
    words = "The model server did not accept a connection in time."
    transient = True


class ProviderAuthFailed(ConfirmedRejection):
    code = "PROVIDER_AUTH_FAILED"
    words = "The model server refused the key (HTTP 401 or 403): check the account's key."


class ProviderNotFound(ConfirmedRejection):
    code = "PROVIDER_NOT_FOUND"
    words = (
        "The model server has no such model or endpoint (HTTP 404): check the model and base URL."
    )


class ProviderRateLimited(ConfirmedRejection):
    code = "PROVIDER_RATE_LIMITED"
    words = "The model server is limiting calls (HTTP 429); it will be asked again later."
    transient = True


class AmbiguousFailure(ProviderError):
    """The call may or may not have run (timeout, reset after send, 5xx): keep the reservation."""

    code = "PROVIDER_AMBIGUOUS"


class ProviderTimeout(AmbiguousFailure):
    code = "PROVIDER_TIMEOUT"
    words = "The model did not answer in time."
    transient = True


class ProviderConnectionLost(AmbiguousFailure):
    code = "PROVIDER_CONNECTION_LOST"
    words = "The connection to the model server was lost during the call."
    transient = True


class ProviderServerError(AmbiguousFailure):
    code = "PROVIDER_SERVER_ERROR"
    words = "The model server failed (HTTP 5xx)."
    transient = True


class MalformedReply(AmbiguousFailure):
    """The provider answered 2xx but the body could not be read as a reply (not JSON, nested
    past the parser's depth, or a shape the adapter does not expect).

    Ambiguous: the model probably ran, so the reservation is kept. Final: the same server would
    answer the same way, so the step does not ask again.
    """

    code = "PROVIDER_MALFORMED_REPLY"
    words = "The model server answered something that is not a reply."


class ReplyTooLarge(AmbiguousFailure):
    """The reply grew past what the call allows (a size derived from its ``max_tokens``, and
    GARDEN_PROVIDER_MAX_REPLY_BYTES on the wire): reading stopped there and the connection was
    closed. Ambiguous: the model ran, so the reservation is kept; asking again would get the
    same flood, so the call is not retried."""

    code = "REPLY_TOO_LARGE"
    words = "The reply was far longer than the call asked for; it was cut off."


class ProviderConfigError(ProviderError):
    """The account is unusable (unknown provider, missing model). Nothing was sent."""

    code = "PROVIDER_CONFIG"
    words = "The model account cannot make calls as it is set up: check its provider and model."


class EgressRefusedError(ProviderConfigError):
    """The account's base URL is an address the egress policy refuses. Nothing was sent."""

    code = "EGRESS_REFUSED"
    words = (
        "The base URL is an address this site does not connect to; the operator can allow it "
        "(GARDEN_EGRESS_ALLOW_PROVIDERS)."
    )


class CredentialError(ProviderConfigError):
    """The account's key cannot be used: not granted, not configured, or unreadable. Nothing
    was sent. ``code`` names which."""

    words = "The account's key cannot be used here: check the key on the account's page."

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _failures(base: type[ProviderError] = ProviderError) -> list[type[ProviderError]]:
    return [base] + [k for sub in base.__subclasses__() for k in _failures(sub)]


def retry_may_help(code: str) -> bool:
    """Whether a request that ended on the failure named ``code`` may well succeed if the
    person sends it again (``ProviderError.transient``); False for any other code."""
    return any(k.transient and k.code == code for k in _failures())
