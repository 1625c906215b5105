"""Where a model account's key comes from. An owner never names an environment variable.

Two ways to give a key:

- **The operator's named credentials** (``GARDEN_CREDENTIALS``): each names a provider, where
  its key lives (an environment variable or a file of the worker), the one base URL it may be
  sent to, and who may use it (``users``: ``"*"`` or usernames; ``groups``: Django auth
  groups). An account that uses one sends the key only to that base URL.
- **A key the owner pastes**: stored encrypted at rest (Fernet, keys from
  ``GARDEN_FERNET_KEYS``, the first encrypting, all decrypting, so keys rotate), write-only:
  never returned, logged or put in an error.

Accounts made before this model may carry ``legacy_secret_ref`` (``env:NAME``); such an
account keeps working only while one of the operator's credentials reads that same variable
and is granted to the owner, and then it is bound to that credential's base URL.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from garden.providers.types import CredentialError

if TYPE_CHECKING:  # settings import this module's parser before the apps are loaded
    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import Model

DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1",
}
_MAX_KEY_FILE_BYTES = 16_384


@dataclass(frozen=True)
class Credential:
    """One of the operator's named credentials (never its value)."""

    name: str
    provider: str
    base_url: str
    env: str = ""
    file: str = ""
    users: frozenset[str] | None = None  # None: every user
    groups: frozenset[str] = frozenset()

    def granted_to(self, user: AbstractBaseUser) -> bool:
        return granted(user, users=self.users, groups=self.groups)

    def secret(self) -> str:
        """The key, read now from the worker's environment or file."""
        if self.env:
            value = os.environ.get(self.env, "")
        else:
            try:
                with open(self.file, "rb") as handle:
                    value = handle.read(_MAX_KEY_FILE_BYTES).decode().strip()
            except (OSError, UnicodeDecodeError):
                value = ""
        if not value:
            raise CredentialError(
                "CREDENTIAL_UNAVAILABLE",
                f"The operator's credential {self.name!r} has no key on this worker.",
            )
        return value


def parse_credentials(config: dict[str, Any]) -> dict[str, Credential]:
    """The operator's ``GARDEN_CREDENTIALS`` mapping, checked; raises ValueError naming the
    first problem."""
    if not isinstance(config, dict):
        raise ValueError("must be a JSON object of name -> {provider, env|file, users|groups}")
    found: dict[str, Credential] = {}
    for name, spec in config.items():
        where = f"credential {name!r}"
        if not isinstance(spec, dict):
            raise ValueError(f"{where} must be an object")
        unknown = set(spec) - {"provider", "env", "file", "base_url", "users", "groups"}
        if unknown:
            raise ValueError(f"{where} has unknown fields: {', '.join(sorted(unknown))}")
        provider = spec.get("provider")
        if provider not in DEFAULT_BASE_URLS:
            raise ValueError(f"{where}: provider must be one of {', '.join(DEFAULT_BASE_URLS)}")
        if bool(spec.get("env")) == bool(spec.get("file")):
            raise ValueError(f"{where}: give exactly one of env or file")
        users, groups = parse_audience(spec, where)
        base_url = str(spec.get("base_url") or DEFAULT_BASE_URLS[provider]).rstrip("/")
        found[str(name)] = Credential(
            name=str(name),
            provider=provider,
            base_url=base_url,
            env=str(spec.get("env") or ""),
            file=str(spec.get("file") or ""),
            users=users,
            groups=groups,
        )
    return found


def parse_audience(
    spec: dict[str, Any], where: str
) -> tuple[frozenset[str] | None, frozenset[str]]:
    """Who the operator gives a thing to (a credential, an MCP server): ``users`` ("*" or
    usernames; None for everyone) and ``groups``; raises ValueError naming the problem."""
    if "users" not in spec and "groups" not in spec:
        raise ValueError(f'{where}: say who may use it (users: "*" or a list, or groups)')
    users = spec.get("users", [])
    if users != "*" and not (isinstance(users, list) and all(isinstance(u, str) for u in users)):
        raise ValueError(f'{where}: users must be "*" or a list of usernames')
    groups = spec.get("groups", [])
    if not (isinstance(groups, list) and all(isinstance(g, str) for g in groups)):
        raise ValueError(f"{where}: groups must be a list of group names")
    return (None if users == "*" else frozenset(users)), frozenset(groups)


def granted(
    user: AbstractBaseUser, *, users: frozenset[str] | None, groups: frozenset[str]
) -> bool:
    """Whether ``user`` is among ``users`` (None: everyone) or in one of ``groups``."""
    if users is None or user.get_username() in users:
        return True
    return bool(groups) and user.groups.filter(name__in=groups).exists()


def credentials() -> dict[str, Credential]:
    """The operator's credentials, read from settings at every use (parsing is cached)."""
    return _parsed(json.dumps(settings.GARDEN_CREDENTIALS, sort_keys=True))


@lru_cache(maxsize=4)
def _parsed(config: str) -> dict[str, Credential]:
    return parse_credentials(json.loads(config))


def credentials_for(user: AbstractBaseUser) -> list[Credential]:
    """The operator's credentials ``user`` may use, by name."""
    return [c for _, c in sorted(credentials().items()) if c.granted_to(user)]


def credential_check(
    *, user: AbstractBaseUser, name: str, provider: str, base_url: str = ""
) -> Credential:
    """The credential ``name`` for an account of ``provider`` at ``base_url`` owned by
    ``user``; raises CredentialError naming why it cannot be used."""
    credential = credentials().get(name)
    if credential is None or not credential.granted_to(user):
        raise CredentialError(
            "CREDENTIAL_NOT_ALLOWED", f"No credential named {name!r} is available to you."
        )
    if credential.provider != provider:
        raise CredentialError(
            "CREDENTIAL_PROVIDER_MISMATCH",
            f"The credential {name!r} is for {credential.provider}, not {provider}.",
        )
    if base_url and base_url.rstrip("/") != credential.base_url:
        raise CredentialError(
            "CREDENTIAL_BASE_URL_MISMATCH",
            f"The credential {name!r} may only be sent to "
            f"{credential.base_url}; leave base_url empty.",
        )
    return credential


def legacy_credential(*, user: AbstractBaseUser, ref: str) -> Credential:
    """The operator credential that allows a legacy ``env:NAME`` reference, if any."""
    scheme, _, variable = ref.partition(":")
    for credential in credentials().values():
        if (
            scheme == "env"
            and variable
            and credential.env == variable
            and credential.granted_to(user)
        ):
            return credential
    raise CredentialError(
        "CREDENTIAL_NOT_ALLOWED",
        f"The key reference {ref!r} is not one of the operator's credentials; choose a "
        "credential or paste a key for this account.",
    )


# --- keys the owner pastes ------------------------------------------------------------------


def _development_key() -> bytes:
    # Development only: derived from SECRET_KEY so a fresh checkout works; production must set
    # GARDEN_FERNET_KEYS (pasting a key is refused until it does).
    digest = hashlib.sha256(b"garden api keys\0" + settings.SECRET_KEY.encode()).digest()
    return base64.urlsafe_b64encode(digest)


def fernet() -> MultiFernet | None:
    """The keys pasted API keys are encrypted with: ``GARDEN_FERNET_KEYS`` (first encrypts,
    every one decrypts), or in development one derived from SECRET_KEY. None when production
    has none configured."""
    keys = tuple(settings.GARDEN_FERNET_KEYS)
    if not keys:
        if settings.PRODUCTION:
            return None
        keys = (_development_key().decode(),)
    return _multifernet(keys)


@lru_cache(maxsize=4)
def _multifernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(k.encode()) for k in keys])


def api_key_encrypt(plain: str) -> str:
    box = fernet()
    if box is None:
        raise CredentialError(
            "KEY_STORAGE_NOT_CONFIGURED",
            "This site cannot store API keys: the operator has not set "
            "GARDEN_FERNET_KEYS. Use one of the operator's credentials.",
        )
    return box.encrypt(plain.encode()).decode()


def api_key_decrypt(token: str) -> str:
    box = fernet()
    try:
        if box is None:
            raise InvalidToken
        return box.decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise CredentialError(
            "KEY_UNREADABLE",
            "The stored key cannot be decrypted with this site's keys; paste it again.",
        ) from exc


@dataclass(frozen=True)
class EncryptedField:
    """A model field that holds tokens encrypted with ``api_key_encrypt`` (empty: none)."""

    model: type[Model]
    field: str
    label: str


_ENCRYPTED_FIELDS: dict[tuple[str, str], EncryptedField] = {}


def encrypted_field_register(*, model: type[Model], field: str, label: str) -> None:
    """Name a field that holds encrypted tokens, so ``manage.py rotate_api_keys`` re-encrypts
    it. Each app registers its own from ``AppConfig.ready()``."""
    _ENCRYPTED_FIELDS[(model._meta.label, field)] = EncryptedField(model, field, label)


def encrypted_fields() -> tuple[EncryptedField, ...]:
    return tuple(_ENCRYPTED_FIELDS.values())


def api_key_rotate(token: str) -> str:
    """``token`` re-encrypted under the first key (MultiFernet.rotate)."""
    box = fernet()
    if box is None:
        raise CredentialError("KEY_STORAGE_NOT_CONFIGURED", "GARDEN_FERNET_KEYS is not set.")
    try:
        return box.rotate(token.encode()).decode()
    except InvalidToken as exc:
        raise CredentialError("KEY_UNREADABLE", "No configured key decrypts it.") from exc
