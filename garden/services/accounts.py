"""Writes for model accounts: how an agent reaches its model, and where its key comes from."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from garden import credentials, egress
from garden.errors import QuotaExceeded, ServiceError, scope_refused
from garden.models import ModelAccount
from garden.providers import ChatMessage, ChatRequest, ProviderError, TextBlock, get_provider
from garden.providers.scripted import options_problem
from garden.providers.types import CredentialError
from garden.quotas import quota_hold
from garden.selectors import account_config
from garden.slots import call_slot

log = logging.getLogger(__name__)

MAX_OPTIONS_BYTES = 65_536
# What an HTTP header can carry: a key outside it would fail every call.
_KEY_TEXT = re.compile(r"[\x21-\x7e]{1,4096}")


@dataclass(frozen=True)
class CheckedAccount:
    """What a model account write stores for its key, once every rule passed."""

    credential: str
    api_key_encrypted: str
    legacy_secret_ref: str
    # The stored key was dropped because the account now points elsewhere (API_KEY_CLEARED).
    api_key_cleared: bool = False


def model_account_check(
    *,
    owner: AbstractBaseUser,
    provider: str,
    model: str = "",
    base_url: str = "",
    credential: str = "",
    api_key: str | None = None,
    clear_api_key: bool = False,
    options: dict[str, Any] | None = None,
    timeout_seconds: float = 60.0,
    staff: bool = False,
    account: ModelAccount | None = None,
) -> CheckedAccount:
    """Check a model account as it would be stored (``account`` when changing one); raise
    ServiceError naming the field. ``api_key`` None keeps the stored key — unless the base URL
    or the provider changes: a stored key is bound to where it was pasted for, so it is dropped
    (``api_key_cleared``) and never sent to the new host; a credential and a pasted key exclude
    each other, and either replaces a legacy ``env:`` reference."""
    if provider not in ModelAccount.Provider.values:
        raise ServiceError("invalid_choice", f"Unknown provider {provider!r}.", field="provider")
    options = options or {}
    if len(json.dumps(options)) > MAX_OPTIONS_BYTES:
        raise ServiceError(
            "OPTIONS_TOO_LARGE",
            f"options must be at most {MAX_OPTIONS_BYTES:,} bytes of JSON.",
            field="options",
        )
    if provider == ModelAccount.Provider.SCRIPTED:
        if not (staff or settings.GARDEN_ALLOW_SCRIPTED_ACCOUNTS):
            raise ServiceError(
                "SCRIPTED_NOT_ALLOWED",
                "Scripted accounts are a development tool "
                "this site does not offer; use a model provider.",
                field="provider",
            )
        problem = options_problem(options)
        if problem:
            raise ServiceError(
                "INVALID_SCRIPT", f"The script is invalid: {problem}.", field="options"
            )
        limit = min(timeout_seconds, settings.GARDEN_MODEL_CALL_TIMEOUT)
        if float(options.get("delay", 0) or 0) >= limit:
            raise ServiceError(
                "SCRIPT_DELAY_TOO_LONG",
                f"delay must be shorter than the account's timeout ({limit:g} s).",
                field="options",
            )
        if credential or api_key or base_url:
            raise ServiceError(
                "NO_KEY_FOR_SCRIPTED",
                "A scripted account has no base URL or key.",
                field="credential" if credential else "api_key" if api_key else "base_url",
            )
        return CheckedAccount(credential="", api_key_encrypted="", legacy_secret_ref="")
    if not model:
        raise ServiceError("required", "A model name is required.", field="model")
    if base_url:
        try:
            egress.check_url(base_url, "provider")
        except egress.EgressRefused as exc:
            raise ServiceError(exc.code, f"base_url: {exc.message}", field="base_url") from exc
    if credential and api_key:
        raise ServiceError(
            "ONE_KEY_SOURCE", "Give a credential or a key, not both.", field="api_key"
        )
    if api_key and not _KEY_TEXT.fullmatch(api_key):
        raise ServiceError(
            "INVALID_KEY", "A key is printable ASCII text without spaces.", field="api_key"
        )
    try:
        if credential:
            credentials.credential_check(
                user=owner, name=credential, provider=provider, base_url=base_url
            )
            return CheckedAccount(credential=credential, api_key_encrypted="", legacy_secret_ref="")
        if api_key:
            return CheckedAccount(
                credential="",
                legacy_secret_ref="",
                api_key_encrypted=credentials.api_key_encrypt(api_key),
            )
    except CredentialError as exc:
        raise ServiceError(
            exc.code, str(exc), field="credential" if credential else "api_key"
        ) from exc
    kept = account if account is not None and not clear_api_key else None
    if kept is not None and key_moves(account=kept, provider=provider, base_url=base_url):
        return CheckedAccount(
            credential="",
            api_key_encrypted="",
            legacy_secret_ref="",
            api_key_cleared=bool(kept.api_key_encrypted or kept.legacy_secret_ref),
        )
    return CheckedAccount(
        credential="",
        api_key_encrypted=kept.api_key_encrypted if kept else "",
        legacy_secret_ref=kept.legacy_secret_ref if kept else "",
    )


def key_moves(*, account: ModelAccount, provider: str, base_url: str) -> bool:
    """Whether a change would send ``account``'s stored key somewhere it was not given for.
    Any change of the base URL counts (a path can route to another tenant of the same host)."""
    return provider != account.provider or base_url.strip() != account.base_url.strip()


SCRIPTED_ACCOUNT_NAME = "Scripted (offline)"


def model_account_create(
    *,
    owner: AbstractBaseUser,
    name: str,
    provider: str,
    model: str = "",
    base_url: str = "",
    credential: str = "",
    api_key: str | None = None,
    timeout_seconds: float = 60.0,
    options: dict[str, Any] | None = None,
    staff: bool = False,
) -> ModelAccount:
    """Create an account under ``model_account_check``'s rules and the owner's account quota."""
    checked = model_account_check(
        owner=owner,
        provider=provider,
        model=model,
        base_url=base_url,
        credential=credential,
        api_key=api_key,
        options=options,
        timeout_seconds=timeout_seconds,
        staff=staff,
    )
    account = ModelAccount(
        owner=owner,
        name=name,
        provider=provider,
        model=model,
        base_url=base_url,
        credential=checked.credential,
        api_key_encrypted=checked.api_key_encrypted,
        timeout_seconds=timeout_seconds,
        options=options or {},
    )
    account.full_clean()
    limit = settings.GARDEN_MAX_MODEL_ACCOUNTS_PER_OWNER
    with transaction.atomic():
        account.save()
        quota_hold(
            owner_id=owner.pk,
            limit=limit,
            count=ModelAccount.objects.filter(owner=owner).count,
            refusal=lambda: QuotaExceeded(
                "ACCOUNT_LIMIT",
                f"You have {limit} model accounts, the limit on this site; delete one first.",
            ),
        )
    return account


_UNCHANGED: Any = object()


@dataclass(frozen=True)
class AccountChange:
    """A changed account, and whether its stored key was dropped because it now points
    elsewhere."""

    account: ModelAccount
    api_key_cleared: bool


def model_account_update(
    *,
    account: ModelAccount,
    name: str = _UNCHANGED,
    model: str = _UNCHANGED,
    base_url: str = _UNCHANGED,
    credential: str = _UNCHANGED,
    api_key: str | None = None,
    clear_api_key: bool = False,
    timeout_seconds: float = _UNCHANGED,
    options: dict[str, Any] = _UNCHANGED,
    manage: bool = True,
) -> AccountChange:
    """Change what is given; the key rules are checked on the account as it will be. A new
    base URL without a new key drops the stored key (``api_key_cleared``): a key never follows
    the account to another host. Without ``manage`` (a token without that scope) a change that
    would replace or drop the key the account has — a pasted key, a legacy reference or an
    operator credential — is refused (403 TOKEN_SCOPE) and nothing is written: a dropped key
    cannot be got back from garden. Giving a key to an account without one needs no more."""

    def pick(value: Any, current: Any) -> Any:
        return current if value is _UNCHANGED else value

    new_credential = pick(credential, account.credential)
    if api_key:
        new_credential = ""  # a pasted key replaces the operator credential
    checked = model_account_check(
        owner=account.owner,
        provider=account.provider,
        model=pick(model, account.model),
        base_url=pick(base_url, account.base_url),
        credential=new_credential,
        api_key=api_key,
        clear_api_key=clear_api_key or bool(new_credential),
        options=pick(options, account.options),
        timeout_seconds=pick(timeout_seconds, account.timeout_seconds),
        account=account,
    )
    with transaction.atomic():
        # Locked and re-read: a key rotation running at the same time is neither lost nor
        # overwritten with the token it replaced.
        locked = ModelAccount.objects.select_for_update(no_key=True).get(pk=account.pk)
        if (
            api_key is None
            and not clear_api_key
            and not new_credential
            and not checked.api_key_cleared
            and not key_moves(
                account=locked,
                provider=account.provider,
                base_url=pick(base_url, account.base_url),
            )
        ):
            checked = replace(checked, api_key_encrypted=locked.api_key_encrypted)
        stored = (locked.credential, locked.api_key_encrypted, locked.legacy_secret_ref)
        kept = (checked.credential, checked.api_key_encrypted, checked.legacy_secret_ref)
        if not manage and any(stored) and kept != stored:
            raise scope_refused("manage")
        locked.name = pick(name, account.name)
        locked.model = pick(model, account.model)
        locked.base_url = pick(base_url, account.base_url)
        locked.timeout_seconds = pick(timeout_seconds, account.timeout_seconds)
        locked.options = pick(options, account.options)
        locked.credential = checked.credential
        locked.api_key_encrypted = checked.api_key_encrypted
        locked.legacy_secret_ref = checked.legacy_secret_ref
        locked.full_clean()
        locked.save()
    return AccountChange(account=locked, api_key_cleared=checked.api_key_cleared)


@dataclass(frozen=True)
class AccountTestResult:
    ok: bool
    code: str | None
    message: str


def model_account_test(*, account: ModelAccount) -> AccountTestResult:
    """Make one tiny call with ``account``, as a step would (its key, the egress policy, one of
    the owner's call slots), bounded by GARDEN_ACCOUNT_TEST_TIMEOUT; say what happened by name.
    Outside any request: it spends no group's budget."""

    try:
        config = account_config(account)
        config = replace(config, timeout=min(config.timeout, settings.GARDEN_ACCOUNT_TEST_TIMEOUT))
        with call_slot(owner_id=account.owner_id) as free:
            if not free:
                return AccountTestResult(
                    False,
                    "CALLS_IN_FLIGHT",
                    "All your model-call slots are in use right now; try again in a moment.",
                )
            reply = get_provider(config).complete(
                ChatRequest(
                    system="",
                    max_tokens=16,
                    messages=(ChatMessage("user", (TextBlock("Reply with the word OK."),)),),
                )
            )
    except ProviderError as exc:
        # The code and what kind of failure it was; never the body a server sent back (an
        # allowed internal host must not become a way to read its answers).
        return AccountTestResult(
            False,
            exc.code,
            _TEST_MESSAGES.get(exc.code)
            or (
                exc.words
                if exc.words != ProviderError.words
                else f"The call failed ({exc.code}{f', HTTP {exc.status}' if exc.status else ''})."
            ),
        )
    except Exception:  # the test answers by name whatever happens; the log has the rest
        log.exception("model account %s test failed", account.pk)
        return AccountTestResult(False, "TEST_FAILED", "The test could not be made.")
    return AccountTestResult(True, None, f"The model answered: {reply.text.strip()[:200]!r}")


_TEST_MESSAGES = {
    "EGRESS_REFUSED": "The base URL is an address this site does not connect to; the operator "
    "can allow it (GARDEN_EGRESS_ALLOW_PROVIDERS).",
    "CREDENTIAL_NOT_ALLOWED": "This key reference is not one of the operator's credentials "
    "available to you.",
    "CREDENTIAL_UNAVAILABLE": "The operator's credential has no key on this site.",
    "CREDENTIAL_BASE_URL_MISMATCH": "The operator's credential may not be sent to this base URL.",
    "KEY_UNREADABLE": "The stored key cannot be decrypted; paste it again.",
}


def model_account_delete(*, account: ModelAccount) -> None:
    if account.agents.exists():
        raise ServiceError(
            "ACCOUNT_IN_USE", "Agents use this account; give them another first.", status=409
        )
    account.delete()


def scripted_account_for(*, owner: AbstractBaseUser) -> ModelAccount:
    """The owner's default offline account (created on first use)."""
    # The owner may have made accounts of the same name; the oldest scripted one is the default.
    account = (
        ModelAccount.objects.filter(
            owner=owner, name=SCRIPTED_ACCOUNT_NAME, provider=ModelAccount.Provider.SCRIPTED
        )
        .order_by("id")
        .first()
    )
    if account is None:
        account = ModelAccount.objects.create(
            owner=owner,
            name=SCRIPTED_ACCOUNT_NAME,
            provider=ModelAccount.Provider.SCRIPTED,
            model="scripted",
        )
    return account
