"""Provider adapters: neutral types in, one model call out, failures classified.

The neutral types (``garden.providers.types``) are plain dataclasses; the adapters, and with
them the HTTP client and the egress policy, load on first use of ``get_provider``,
``Provider`` or ``inline_media_types``, so a pure module importing the types pulls in nothing
else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .types import (
    AccountConfig,
    AmbiguousFailure,
    ArtifactRef,
    Block,
    ChatMessage,
    ChatReply,
    ChatRequest,
    ConfirmedRejection,
    CredentialError,
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
    ToolResult,
    ToolSpec,
    Usage,
    retry_may_help,
)

if TYPE_CHECKING:
    from .base import Provider, get_provider, inline_media_types

_ADAPTERS = frozenset({"Provider", "get_provider", "inline_media_types"})


def __getattr__(name: str) -> Any:
    if name in _ADAPTERS:
        from . import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AccountConfig",
    "AmbiguousFailure",
    "ArtifactRef",
    "Block",
    "ChatMessage",
    "ChatReply",
    "ChatRequest",
    "ConfirmedRejection",
    "CredentialError",
    "EgressRefusedError",
    "MalformedReply",
    "Provider",
    "ProviderAuthFailed",
    "ProviderConfigError",
    "ProviderConnectTimeout",
    "ProviderConnectionLost",
    "ProviderError",
    "ProviderNameNotFound",
    "ProviderNotFound",
    "ProviderRateLimited",
    "ProviderServerError",
    "ProviderTimeout",
    "ProviderTlsFailed",
    "ProviderUnreachable",
    "ReplyTooLarge",
    "TextBlock",
    "TextSink",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "get_provider",
    "inline_media_types",
    "retry_may_help",
]
