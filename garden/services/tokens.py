"""Personal access tokens: made (shown once), found by their hash, revoked."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from garden.errors import QuotaExceeded, ServiceError
from garden.models import AccessToken
from garden.models.tokens import DEFAULT_SCOPES, SCOPES
from garden.quotas import quota_hold

# "gdn_" says what it is (a secret scanner can match it); 32 random bytes say the rest.
TOKEN_PREFIX = "gdn_"
PREFIX_CHARS = 12
# Writing last_used_at on every request would make each call a write; a minute is plenty.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class MadeToken:
    token: AccessToken
    secret: str  # the whole token, shown to its owner once


def token_hash(secret: str) -> str:
    # The token carries 256 random bits: a plain SHA-256 cannot be reversed or guessed, and
    # lets the row be found by its hash in one indexed read.
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def token_create(
    *,
    owner: AbstractBaseUser,
    name: str,
    expires_in_days: int | None = None,
    scopes: list[str] | None = None,
) -> MadeToken:
    """Make a token for ``owner``. Every token expires: after ``expires_in_days`` (1 to
    GARDEN_TOKEN_MAX_DAYS), or GARDEN_TOKEN_DEFAULT_DAYS when none is given. It may do what
    its ``scopes`` say (``garden.models.tokens.SCOPES``; read and write when none are given:
    ``manage`` is asked for by name). The caller has made sure a signed-in person asked for
    it, with their password (garden.api.views)."""
    name = name.strip()
    if not name:
        raise ServiceError("NAME_REQUIRED", "Give the token a name.", field="name")
    scopes = list(DEFAULT_SCOPES) if scopes is None else list(dict.fromkeys(scopes))
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown or not scopes:
        raise ServiceError(
            "INVALID_SCOPES",
            f"A token's scopes are some of {', '.join(SCOPES)}"
            + (f"; not {', '.join(unknown)}." if unknown else "."),
            field="scopes",
        )
    longest = settings.GARDEN_TOKEN_MAX_DAYS
    if expires_in_days is None:
        expires_in_days = min(settings.GARDEN_TOKEN_DEFAULT_DAYS, longest)
    if not 1 <= expires_in_days <= longest:
        raise ServiceError(
            "INVALID_EXPIRY",
            f"A token lasts 1 to {longest} days.",
            field="expires_in_days",
        )
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    limit = settings.GARDEN_MAX_TOKENS_PER_OWNER
    with transaction.atomic():
        token = AccessToken.objects.create(
            owner=owner,
            name=name[:100],
            prefix=secret[:PREFIX_CHARS],
            token_hash=token_hash(secret),
            expires_at=timezone.now() + timedelta(days=expires_in_days),
            scopes=scopes,
        )
        quota_hold(
            owner_id=owner.pk,
            limit=limit,
            count=AccessToken.objects.filter(owner=owner, revoked_at__isnull=True).count,
            refusal=lambda: QuotaExceeded(
                "TOKEN_LIMIT",
                f"You have {limit} tokens, the limit on this site; revoke one to make another.",
            ),
        )
    return MadeToken(token=token, secret=secret)


def token_revoke(*, token: AccessToken) -> None:
    """Revoke ``token`` for good; idempotent. Requests already authenticated by it finish."""
    AccessToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )


def token_revoke_all(*, owner: AbstractBaseUser) -> int:
    """Revoke every live token of ``owner`` (their password changed, or their account was
    deactivated); how many were revoked."""
    return AccessToken.objects.filter(owner=owner, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )


def token_authenticate(secret: str) -> tuple[AccessToken | None, str]:
    """The live token ``secret`` names and "", or None and why not (TOKEN_INVALID,
    TOKEN_REVOKED, TOKEN_EXPIRED). Marks it used, at most once a minute."""
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
        return None, "TOKEN_INVALID"
    token = (
        AccessToken.objects.select_related("owner").filter(token_hash=token_hash(secret)).first()
    )
    if token is None or not token.owner.is_active:
        return None, "TOKEN_INVALID"
    now = timezone.now()
    if token.revoked_at is not None:
        return None, "TOKEN_REVOKED"
    # A token made before every token had a lifetime lasts the longest lifetime from its making.
    expires_at = token.expires_at or token.created_at + timedelta(
        days=settings.GARDEN_TOKEN_MAX_DAYS
    )
    if expires_at <= now:
        return None, "TOKEN_EXPIRED"
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        AccessToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token, ""
