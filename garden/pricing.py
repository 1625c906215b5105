"""What a model call costs, in US dollars: the maintained price table (genai-prices, as
bundled with the installed package; it is never updated over the network) under the
operator's overrides (GARDEN_MODEL_PRICES) for self-hosted or negotiated models. A call whose
model has no price costs None: it is counted as unpriced, never as free."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.conf import settings
from genai_prices import Usage as TableUsage
from genai_prices import data_snapshot

from garden import credentials

if TYPE_CHECKING:
    from garden.models import ModelAccount

log = logging.getLogger(__name__)

# The cost columns keep nine decimal places (a billionth of a dollar); every cost is rounded
# to them here, so what a call records is what its request and the day's totals add up.
PLACES = Decimal("0.000000001")
_MILLION = Decimal(1_000_000)
_OVERRIDE_FIELDS = ("input_per_mtok", "output_per_mtok")
# The provider kinds priced from the table, and the hosts that are the provider itself: a
# model there is looked up under that provider; elsewhere (an OpenAI-compatible server, a
# proxy) by the model's name alone.
_TABLE_PROVIDERS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}
SCRIPTED = "scripted"


@dataclass(frozen=True)
class ModelPrice:
    """An operator's price for a model, in dollars per million tokens."""

    input_per_mtok: Decimal
    output_per_mtok: Decimal


@dataclass(frozen=True)
class PricedCall:
    """One model call as its reservation records it: the provider kind and model it went to,
    the provider's token counts, and its cost (None: the model has no price)."""

    provider: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal | None = Decimal(0)

    def recorded(self) -> dict[str, Any]:
        """The reservation's fields that record this call."""
        return {
            "provider": self.provider,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": self.cost,
        }


def parse_overrides(config: Any) -> dict[str, ModelPrice]:
    """The operator's ``GARDEN_MODEL_PRICES``, checked: a JSON object of model (or
    ``provider/model``) -> {"input_per_mtok": "2.5", "output_per_mtok": "10"}. Keys are matched
    without regard to case. Raises ValueError naming the first problem."""
    if not isinstance(config, dict):
        raise ValueError(
            'must be a JSON object of model -> {"input_per_mtok": …, "output_per_mtok": …}'
        )
    found: dict[str, ModelPrice] = {}
    for key, spec in config.items():
        name = str(key).strip().lower()
        if not name:
            raise ValueError("a model name is empty")
        if not isinstance(spec, dict) or set(spec) != set(_OVERRIDE_FIELDS):
            raise ValueError(
                f"{key}: give exactly input_per_mtok and output_per_mtok (dollars per million "
                "tokens)"
            )
        prices = []
        for field in _OVERRIDE_FIELDS:
            value = spec[field]
            try:
                price = Decimal(str(value)) if isinstance(value, (str, int, float)) else None
            except InvalidOperation:
                price = None
            if isinstance(value, bool) or price is None or not price.is_finite() or price < 0:
                raise ValueError(f"{key}: {field} must be a number of dollars, 0 or more")
            prices.append(price)
        if name in found:
            raise ValueError(f"{key}: named twice (names are matched without regard to case)")
        found[name] = ModelPrice(*prices)
    return found


def overrides() -> dict[str, ModelPrice]:
    """The operator's overrides, read from settings at every use (parsing is cached). A
    malformed setting is refused at start-up (garden.E011); a worker that runs with one anyway
    logs it and prices from the table alone."""
    return _parsed(json.dumps(settings.GARDEN_MODEL_PRICES, sort_keys=True, default=str))


@lru_cache(maxsize=4)
def _parsed(config: str) -> dict[str, ModelPrice]:
    try:
        return parse_overrides(json.loads(config))
    except ValueError as exc:
        log.error("GARDEN_MODEL_PRICES is ignored: %s", exc)
        return {}


def table_provider(*, provider: str, base_url: str = "") -> str | None:
    """The price table's provider for a call of ``provider`` (garden's kind) to ``base_url``:
    the provider itself when the URL is its own (or the default), else None (the table is
    searched by the model's name alone)."""
    host = _TABLE_PROVIDERS.get(provider)
    if host is None:
        return None
    if not base_url or urlsplit(base_url).hostname == host:
        return provider
    return None


@lru_cache(maxsize=1024)
def _table_entry(provider_id: str | None, model: str) -> tuple[Any, Any] | None:
    """The table's (provider, model) for ``model``, or None; misses are remembered too (a miss
    searches every provider)."""
    try:
        return data_snapshot.get_snapshot().find_provider_model(model, None, provider_id, None)
    except LookupError:
        return None


def call_cost(
    *,
    provider: str,
    model: str,
    input_tokens: int,
    output_tokens: int,
    base_url: str = "",
) -> Decimal | None:
    """What a call of ``provider`` (garden's kind: scripted, openai, anthropic) to ``model``
    cost, in dollars rounded to ``PLACES``; None when the model has no price. An operator's
    override (``provider/model`` first, then ``model``) wins over the table; scripted calls are
    offline and cost nothing."""
    if provider == SCRIPTED:
        return Decimal(0)
    name = model.strip().lower()
    if not name:
        return None
    prices = overrides()
    price = prices.get(f"{provider}/{name}") or prices.get(name)
    if price is not None:
        cost = (
            input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok
        ) / _MILLION
        return cost.quantize(PLACES, rounding=ROUND_HALF_EVEN)
    entry = _table_entry(table_provider(provider=provider, base_url=base_url), name)
    if entry is None:
        return None
    table_provider_row, table_model = entry
    calculation = table_model.calc_price(
        TableUsage(input_tokens=input_tokens, output_tokens=output_tokens), table_provider_row
    )
    return Decimal(calculation.total_price).quantize(PLACES, rounding=ROUND_HALF_EVEN)


def known_model(*, provider: str, model: str) -> str | None:
    """The name garden knows ``model`` by, for a call of ``provider`` (garden's kind), or None:
    the operator's override's name (``GARDEN_MODEL_PRICES``), else the price table's id of the
    model among ``provider``'s own (the table matches dated and versioned names to one id).
    Owners name their accounts' models freely; what this answers is a fixed set, the
    operator's and the installed table's, whatever owners name (the metrics' model labels)."""
    name = model.strip().lower()
    if not name or provider == SCRIPTED:
        return None
    prices = overrides()
    if f"{provider}/{name}" in prices or name in prices:
        return name
    if provider not in _TABLE_PROVIDERS:
        return None
    entry = _table_entry(provider, name)
    return entry[1].id if entry is not None else None


def account_base_url(account: ModelAccount) -> str:
    """Where ``account``'s calls go: its own base URL, else its operator credential's, else
    the provider's default ("")."""
    if account.base_url:
        return account.base_url
    if account.credential:
        try:
            credential = credentials.credentials().get(account.credential)
        except ValueError:  # a malformed GARDEN_CREDENTIALS: refused at start-up
            credential = None
        if credential is not None:
            return credential.base_url
    return ""


def price_call(
    *, account: ModelAccount | None, input_tokens: int, output_tokens: int
) -> PricedCall:
    """The call ``account`` (a ModelAccount) made, with its tokens and cost."""
    if account is None:
        return PricedCall(provider="", model="", cost=None)
    return PricedCall(
        provider=account.provider,
        model=account.model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost=call_cost(
            provider=account.provider,
            model=account.model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            base_url=account_base_url(account),
        ),
    )
