"""The price of a call: the genai-prices table (by provider at the provider's own URL, by the
model's name alone elsewhere), the operator's overrides winning over it, scripted calls free,
unknown models unpriced; and GARDEN_MODEL_PRICES refused at start-up when malformed."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.checks import run_checks
from genai_prices import Usage, calc_price

from garden.pricing import PLACES, call_cost, parse_overrides, price_call, table_provider
from garden.services.accounts import model_account_create

pytestmark = pytest.mark.django_db


def table(model: str, tokens: tuple[int, int], provider_id: str | None = None) -> Decimal:
    usage = Usage(input_tokens=tokens[0], output_tokens=tokens[1])
    return calc_price(usage, model_ref=model, provider_id=provider_id).total_price


@pytest.mark.parametrize(
    ("provider", "model", "base_url", "provider_id"),
    [
        ("openai", "gpt-4o", "", "openai"),
        ("openai", "gpt-4o-mini", "https://api.openai.com/v1", "openai"),
        ("anthropic", "claude-3-5-haiku-latest", "", "anthropic"),
        # An OpenAI-compatible server that is not OpenAI: the model's name alone.
        ("openai", "gpt-4o", "http://127.0.0.1:8080/v1", None),
    ],
)
def test_a_call_costs_its_tokens_at_the_tables_prices(provider, model, base_url, provider_id):
    tokens = (12_345, 678)

    cost = call_cost(
        provider=provider,
        model=model,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        base_url=base_url,
    )

    assert table_provider(provider=provider, base_url=base_url) == provider_id
    assert cost == table(model, tokens, provider_id).quantize(PLACES)
    assert cost > 0


def test_scripted_calls_cost_nothing_and_unknown_models_have_no_price():
    assert call_cost(provider="scripted", model="x", input_tokens=9, output_tokens=9) == 0
    assert (
        call_cost(provider="openai", model="no-such-model-7b", input_tokens=9, output_tokens=9)
        is None
    )
    assert call_cost(provider="openai", model="", input_tokens=9, output_tokens=9) is None


def test_an_override_wins_over_the_table_provider_qualified_first(settings):
    settings.GARDEN_MODEL_PRICES = {
        "gpt-4o": {"input_per_mtok": "1", "output_per_mtok": "2"},
        "anthropic/claude-3-5-haiku-latest": {"input_per_mtok": 0.5, "output_per_mtok": 0},
        "claude-3-5-haiku-latest": {"input_per_mtok": "9", "output_per_mtok": "9"},
        "ollama/Llama3.1": {"input_per_mtok": "0", "output_per_mtok": "0"},
    }

    gpt = call_cost(provider="openai", model="GPT-4o", input_tokens=3_000, output_tokens=500)
    haiku = call_cost(
        provider="anthropic",
        model="claude-3-5-haiku-latest",
        input_tokens=1_000_000,
        output_tokens=7,
    )
    llama = call_cost(provider="openai", model="ollama/llama3.1", input_tokens=50, output_tokens=5)

    assert gpt == Decimal("0.004") != table("gpt-4o", (3_000, 500), "openai")
    assert haiku == Decimal("0.5")
    assert llama == 0  # priced, at nothing: not unpriced


def test_a_call_records_its_accounts_provider_and_model(owner, loopback_providers):
    account = model_account_create(
        owner=owner, name="gpt", provider="openai", model="gpt-4o", base_url="http://127.0.0.1:9/v1"
    )

    call = price_call(account=account, input_tokens=100, output_tokens=10)

    assert (call.provider, call.model, call.input_tokens, call.output_tokens) == (
        "openai",
        "gpt-4o",
        100,
        10,
    )
    assert call.cost == table("gpt-4o", (100, 10))


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        (["gpt-4o"], "must be a JSON object"),
        ({"gpt-4o": {"input_per_mtok": "1"}}, "give exactly input_per_mtok and output_per_mtok"),
        ({"gpt-4o": {"input_per_mtok": "1", "output_per_mtok": "2", "x": 1}}, "give exactly"),
        ({"gpt-4o": {"input_per_mtok": "-1", "output_per_mtok": "2"}}, "input_per_mtok must be"),
        ({"gpt-4o": {"input_per_mtok": "1", "output_per_mtok": "cheap"}}, "output_per_mtok must"),
        ({"gpt-4o": {"input_per_mtok": "NaN", "output_per_mtok": "1"}}, "input_per_mtok must"),
        ({"gpt-4o": {"input_per_mtok": True, "output_per_mtok": "1"}}, "input_per_mtok must"),
        ({" ": {"input_per_mtok": "1", "output_per_mtok": "1"}}, "a model name is empty"),
        (
            {
                "GPT-4o": {"input_per_mtok": "1", "output_per_mtok": "1"},
                "gpt-4o": {"input_per_mtok": "2", "output_per_mtok": "2"},
            },
            "named twice",
        ),
    ],
)
def test_a_malformed_price_table_override_is_refused_at_start_up(settings, config, problem):
    settings.GARDEN_MODEL_PRICES = config

    errors = [e for e in run_checks() if e.id == "garden.E011"]

    assert len(errors) == 1 and problem in errors[0].msg
    with pytest.raises(ValueError, match=problem):
        parse_overrides(config)
    # A worker running with it anyway prices from the table alone.
    assert call_cost(provider="openai", model="gpt-4o", input_tokens=10, output_tokens=0) == (
        table("gpt-4o", (10, 0), "openai").quantize(PLACES)
    )


def test_a_well_formed_override_passes_the_check(settings):
    settings.GARDEN_MODEL_PRICES = {"llama3.1:8b": {"input_per_mtok": 0, "output_per_mtok": "0.1"}}

    assert not [e for e in run_checks() if e.id == "garden.E011"]
