"""Each owner's token budgets on the operator's credentials, per minute and per day (UTC).

The operator's keys are shared: what one owner's calls spend on them (rate limit and money)
is bounded per owner and per credential. Before a call goes out on an operator credential,
``budget_check`` compares what the owner's calls have already spent on that credential in the
current minute and day with the owner's budgets (GARDEN_TOKEN_BUDGET_PER_MINUTE / _PER_DAY, or
the owner's TokenBudget row; 0 is unlimited); after it, ``budget_spend`` adds the tokens its
provider counted. The counters live in the cache (Redis with REDIS_URL, so every worker counts
together; per process on the embedded default), one key per owner, credential and window, kept
a little longer than the window. A call in flight is not counted until it returns, so a budget
can be passed by the calls already out when it was reached (at most the owner's calls in
flight), never by a call that starts after. Accounts on the owner's own key, and scripted
ones, spend no operator credential and are not counted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from garden.models import ModelAccount, TokenBudget
from garden.providers import Usage

TOKEN_BUDGET_SPENT = "TOKEN_BUDGET_SPENT"
MINUTE, DAY = "minute", "day"
_SECONDS = {MINUTE: 60, DAY: 86_400}


@dataclass(frozen=True)
class BudgetSpent:
    """The owner's budget on ``credential`` for the current ``window`` is spent: a call must
    wait ``retry_in`` seconds (the window's end)."""

    window: str
    limit: int
    used: int
    credential: str
    retry_in: float
    code: str = TOKEN_BUDGET_SPENT

    @property
    def message(self) -> str:
        if self.window == MINUTE:
            return (
                f"{self.code}: this minute's token budget on the operator's credential "
                f"{self.credential!r} is spent ({self.used:,} of {self.limit:,} tokens); "
                "the call waits for the next minute."
            )
        return (
            f"{self.code}: today's token budget on the operator's credential "
            f"{self.credential!r} is spent ({self.used:,} of {self.limit:,} tokens); it "
            "starts again at midnight UTC."
        )


def shared_credential(account: ModelAccount | None) -> str:
    """The operator credential an account's calls spend (its name, or its legacy ``env:``
    reference), or "" when they spend none (the owner's own key, a scripted account)."""
    if account is None or account.provider == "scripted":
        return ""
    if account.credential:
        return account.credential
    if account.api_key_encrypted:
        return ""
    return account.legacy_secret_ref


def budget_limits(*, owner_id: int) -> dict[str, int]:
    """The owner's budgets per window (0: unlimited): the owner's TokenBudget where set, else
    the site's."""
    limits = {
        MINUTE: settings.GARDEN_TOKEN_BUDGET_PER_MINUTE,
        DAY: settings.GARDEN_TOKEN_BUDGET_PER_DAY,
    }
    row = TokenBudget.objects.filter(owner_id=owner_id).values("per_minute", "per_day").first()
    if row is not None:
        if row["per_minute"] is not None:
            limits[MINUTE] = row["per_minute"]
        if row["per_day"] is not None:
            limits[DAY] = row["per_day"]
    return limits


def _window(window: str, now: float) -> tuple[int, float]:
    """The window's number and the seconds left in it."""
    span = _SECONDS[window]
    number = int(now // span)
    return number, (number + 1) * span - now


def _key(owner_id: int, credential: str, window: str, number: int) -> str:
    return f"token-budget:{owner_id}:{credential}:{window}:{number}"


def _clock() -> float:
    return time.time()


def budget_used(*, owner_id: int, credential: str, now: float | None = None) -> dict[str, int]:
    """Tokens the owner's calls spent on ``credential`` in the current minute and day."""
    now = _clock() if now is None else now
    keys = {w: _key(owner_id, credential, w, _window(w, now)[0]) for w in (MINUTE, DAY)}
    found = cache.get_many(list(keys.values()))
    return {w: int(found.get(k) or 0) for w, k in keys.items()}


def budget_check(
    *, owner_id: int, account: ModelAccount | None, now: float | None = None
) -> BudgetSpent | None:
    """None when ``account``'s next call fits the owner's budgets on its operator credential
    (or spends none); else what is spent — the day's before the minute's."""
    credential = shared_credential(account)
    if not credential:
        return None
    limits = budget_limits(owner_id=owner_id)
    if not any(limits.values()):
        return None
    now = _clock() if now is None else now
    used = budget_used(owner_id=owner_id, credential=credential, now=now)
    for window in (DAY, MINUTE):
        if limits[window] and used[window] >= limits[window]:
            return BudgetSpent(
                window=window,
                limit=limits[window],
                used=used[window],
                credential=credential,
                retry_in=_window(window, now)[1],
            )
    return None


def budget_spend(
    *, owner_id: int, account: ModelAccount | None, usage: Usage | None, now: float | None = None
) -> None:
    """Count a returned call's tokens against the owner's budgets on its credential."""
    credential = shared_credential(account)
    tokens = (usage.input_tokens + usage.output_tokens) if usage else 0
    if not credential or tokens <= 0:
        return
    now = _clock() if now is None else now
    for window in (MINUTE, DAY):
        key = _key(owner_id, credential, window, _window(window, now)[0])
        # Kept one window longer than it counts, so a late reader still finds it.
        cache.add(key, 0, timeout=2 * _SECONDS[window])
        try:
            cache.incr(key, tokens)
        except ValueError:  # it expired between the two
            cache.set(key, tokens, timeout=2 * _SECONDS[window])


def budget_usage(*, owner_id: int, account: ModelAccount) -> dict | None:
    """What the account's owner has spent and may spend on its operator credential now, for
    the API; None for an account that spends no operator credential."""
    credential = shared_credential(account)
    if not credential:
        return None
    limits = budget_limits(owner_id=owner_id)
    used = budget_used(owner_id=owner_id, credential=credential)
    return {
        "credential": credential,
        "per_minute": limits[MINUTE] or None,
        "per_day": limits[DAY] or None,
        "used_this_minute": used[MINUTE],
        "used_today": used[DAY],
    }
