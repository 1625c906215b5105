"""The adapter interface and the registry that picks an adapter for an account."""

from __future__ import annotations

from typing import Protocol

from .anthropic import AnthropicProvider
from .openai import OpenAIProvider
from .scripted import ScriptedProvider
from .types import AccountConfig, ChatReply, ChatRequest, ProviderConfigError, TextSink


class Provider(Protocol):
    """One model endpoint. ``complete`` makes exactly one model call or raises a ProviderError;
    given ``on_text``, it hands over the reply's text piece by piece as it is generated and
    still returns the whole reply, the same as without."""

    def complete(self, request: ChatRequest, *, on_text: TextSink | None = None) -> ChatReply: ...


def get_provider(config: AccountConfig) -> Provider:
    """Return the adapter for ``config.provider``; raise ProviderConfigError for an unknown one."""
    if config.provider == "scripted":
        return ScriptedProvider(config)
    if config.provider == "openai":
        return OpenAIProvider(config)
    if config.provider == "anthropic":
        return AnthropicProvider(config)
    raise ProviderConfigError(f"unknown provider {config.provider!r}")
