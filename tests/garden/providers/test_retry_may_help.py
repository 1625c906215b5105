"""Every named provider failure says what happened in words (the room shows them beside the
code), and only those that asking again may cure are offered a retry."""

from __future__ import annotations

import pytest

from garden.providers import AmbiguousFailure, ProviderError, retry_may_help
from garden.providers.types import _failures

TRANSIENT = {
    "PROVIDER_UNREACHABLE",
    "PROVIDER_DNS_FAILED",
    "PROVIDER_CONNECT_TIMEOUT",
    "PROVIDER_RATE_LIMITED",
    "PROVIDER_TIMEOUT",
    "PROVIDER_CONNECTION_LOST",
    "PROVIDER_SERVER_ERROR",
}


def test_only_a_server_down_slow_or_busy_is_worth_a_retry():
    assert {k.code for k in _failures() if retry_may_help(k.code)} == TRANSIENT


@pytest.mark.parametrize(
    "code",
    ["EGRESS_REFUSED", "PROVIDER_AUTH_FAILED", "PROVIDER_NOT_FOUND", "CANCELLED", "", "nonsense"],
)
def test_a_refusal_the_same_call_would_meet_again_is_not(code):
    assert retry_may_help(code) is False


def test_every_named_failure_has_its_own_sentence():
    generic = {ProviderError, AmbiguousFailure}
    plain = [k.__name__ for k in _failures() if k not in generic and k.words == ProviderError.words]
    assert plain == []
