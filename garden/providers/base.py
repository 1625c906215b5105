"""The adapter interface and the registry that picks an adapter for an account."""

from __future__ import annotations

from typing import Protocol

from .anthropic import AnthropicProvider
from .openai import OpenAIProvider
from .scripted import ScriptedProvider
from .types import AccountConfig, ChatReply, ChatRequest, ProviderConfigError


class Provider(Protocol):
    """One model endpoint. ``complete`` makes exactly one model call or raises a ProviderError."""

    def complete(self, request: ChatRequest) -> ChatReply: ...


def get_provider(config: AccountConfig) -> Provider:
    """Return the adapter for ``config.provider``; raise ProviderConfigError for an unknown one."""
    if config.provider == "scripted":
        return ScriptedProvider(config)
    if config.provider == "openai":
        return OpenAIProvider(config)
    if config.provider == "anthropic":
        return AnthropicProvider(config)
    raise ProviderConfigError(f"unknown provider {config.provider!r}")
