"""Provider adapters: neutral types in, one model call out, failures classified."""

from .base import Provider, get_provider
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
    ProviderConfigError,
    ProviderConnectionLost,
    ProviderError,
    ProviderServerError,
    ProviderTimeout,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)

__all__ = [
    "AccountConfig", "AmbiguousFailure", "ArtifactRef", "Block", "ChatMessage", "ChatReply",
    "ChatRequest", "ConfirmedRejection", "CredentialError", "EgressRefusedError",
    "MalformedReply", "Provider", "ProviderConfigError",
    "ProviderConnectionLost", "ProviderError", "ProviderServerError", "ProviderTimeout",
    "TextBlock", "ToolCall", "ToolResult", "ToolSpec", "Usage", "get_provider",
]
