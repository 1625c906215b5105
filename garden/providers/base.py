"""The adapter interface and the registry that picks an adapter for an account."""

from __future__ import annotations

from typing import Any, Protocol

from ._wire import carries_media
from .anthropic import AnthropicProvider
from .openai import OpenAIProvider
from .scripted import ScriptedProvider
from .types import AccountConfig, ChatReply, ChatRequest, ProviderConfigError, TextSink


class Provider(Protocol):
    """One model endpoint. ``complete`` makes exactly one model call or raises a ProviderError;
    given ``on_text``, it hands over the reply's text piece by piece as it is generated and
    still returns the whole reply, the same as without."""

    def complete(self, request: ChatRequest, *, on_text: TextSink | None = None) -> ChatReply: ...


def inline_media_types(provider: str, options: dict[str, Any] | None) -> frozenset[str]:
    """The media types an account's adapter sends a model as content parts: none for the
    scripted provider, nor for an account whose options say ``"images": false``."""
    adapter = {"openai": OpenAIProvider, "anthropic": AnthropicProvider}.get(provider)
    if adapter is None or not carries_media(options):
        return frozenset()
    return adapter.media_types


def get_provider(config: AccountConfig) -> Provider:
    """Return the adapter for ``config.provider``; raise ProviderConfigError for an unknown one."""
    if config.provider == "scripted":
        return ScriptedProvider(config)
    if config.provider == "openai":
        return OpenAIProvider(config)
    if config.provider == "anthropic":
        return AnthropicProvider(config)
    raise ProviderConfigError(f"unknown provider {config.provider!r}")
