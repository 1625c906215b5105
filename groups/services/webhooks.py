"""Webhooks: an owner's endpoints, checked against the egress policy when saved, their signing
secret shown once, and the endpoint a message names. The deliveries an event creates are in
``webhook_deliveries``; the tries that send them in ``webhook_sending``."""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from garden import egress
from garden.credentials import CredentialError, api_key_encrypt
from garden.errors import QuotaExceeded, ServiceError, not_found
from garden.quotas import quota_hold
from groups import selectors
from groups.models import Group, WebhookDelivery, WebhookEndpoint
from groups.services.webhook_deliveries import webhook_deliveries_create

EVENTS: tuple[str, ...] = tuple(WebhookEndpoint.Event.values)
TEST_EVENT = "webhook.test"
SECRET_PREFIX = "whsec_"
MAX_URL = 2000
MAX_DESCRIPTION = 200
_UNCHANGED: Any = object()
# A refusal for where the URL leads, said without the address its name resolved to: what an
# internal name resolves to is not the owner's to learn.
_REFUSED_DESTINATION = (
    "The URL's host is a loopback, private, link-local or metadata address, which webhooks "
    "may not reach (GARDEN_EGRESS_ALLOW_WEBHOOK)."
)


@dataclass(frozen=True)
class EndpointWithSecret:
    """An endpoint just created or whose secret was just rotated, and that secret: the one
    time it is shown."""

    endpoint: WebhookEndpoint
    secret: str


def _new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _encrypt(secret: str) -> str:
    try:
        return api_key_encrypt(secret)
    except CredentialError:
        raise ServiceError(
            "ENCRYPTION_UNAVAILABLE",
            "The operator has not set GARDEN_FERNET_KEYS: webhook secrets cannot be stored.",
        ) from None


def refusal_text(exc: egress.EgressRefused) -> str:
    """What an egress refusal says to the owner: never the address a name resolved to."""
    return _REFUSED_DESTINATION if exc.destination else exc.message


def _check_url(url: str, *, owner_id: int) -> str:
    """A URL the egress policy lets a delivery reach: refused by name (EGRESS_REFUSED) when its
    host is, or resolves to, a loopback, private, link-local or metadata address the operator
    has not allowed (GARDEN_EGRESS_ALLOW_WEBHOOK). A name that does not resolve now is kept:
    every try checks it again, which is what protects."""
    url = (url or "").strip() if isinstance(url, str) else ""
    if len(url) > MAX_URL:
        raise ServiceError(
            "INVALID_URL", f"A webhook's URL is at most {MAX_URL} characters.", field="url"
        )
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        raise ServiceError("INVALID_URL", "Not a URL.", field="url") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ServiceError("INVALID_URL", "A webhook's URL is http(s)://host/path.", field="url")
    try:
        egress.check_url(url, "webhook")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        with egress.deadline(settings.GARDEN_EGRESS_DNS_TIMEOUT, owner_id=owner_id):
            egress.check_host(parsed.host, port, "webhook")
    except egress.EgressRefused as exc:
        raise ServiceError(exc.code, refusal_text(exc), field="url") from None
    except (httpcore.ConnectError, httpcore.ConnectTimeout, OSError):
        pass
    return url


def _check_events(events: Any) -> list[str]:
    if (
        not isinstance(events, list | tuple)
        or not events
        or not all(isinstance(e, str) and e in EVENTS for e in events)
    ):
        raise ServiceError(
            "INVALID_EVENTS",
            "events is a non-empty list of: " + ", ".join(EVENTS) + ".",
            field="events",
        )
    return [e for e in EVENTS if e in events]


def _check_group(owner: AbstractBaseUser, group_id: int | None) -> Group | None:
    if group_id is None:
        return None
    group = selectors.group_get(person=owner, group_id=group_id, right="write")
    if group is None:
        raise ServiceError("GROUP_NOT_FOUND", "You have no such group.", field="group")
    return group


def _check_description(description: Any) -> str:
    if not isinstance(description, str) or len(description.strip()) > MAX_DESCRIPTION:
        raise ServiceError(
            "INVALID_DESCRIPTION",
            f"A description is text of at most {MAX_DESCRIPTION} characters.",
            field="description",
        )
    return description.strip()


def webhook_endpoint_create(
    *,
    owner: AbstractBaseUser,
    url: str,
    events: list[str],
    group: int | None = None,
    named_only: bool = False,
    description: str = "",
) -> EndpointWithSecret:
    """Register an endpoint for ``events`` of one of the owner's groups (``group``) or of all
    of them (None); ``named_only`` ones hear only the requests whose message names them.
    Checked first (nothing stored on a refusal), then stored under the owner's quota
    (GARDEN_MAX_WEBHOOKS_PER_OWNER). The secret is returned here and never again."""
    url = _check_url(url, owner_id=owner.pk)
    events = _check_events(events)
    found = _check_group(owner, group)
    description = _check_description(description)
    secret = _new_secret()
    limit = settings.GARDEN_MAX_WEBHOOKS_PER_OWNER
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.create(
            owner=owner,
            group=found,
            named_only=bool(named_only),
            url=url,
            description=description,
            events=events,
            secret_encrypted=_encrypt(secret),
        )
        quota_hold(
            owner_id=owner.pk,
            limit=limit,
            count=WebhookEndpoint.objects.filter(owner=owner).count,
            refusal=lambda: QuotaExceeded(
                "WEBHOOK_LIMIT",
                f"You have {limit} webhook endpoints, the limit on this site; remove one first.",
            ),
        )
    return EndpointWithSecret(endpoint=endpoint, secret=secret)


def webhook_endpoint_update(
    *,
    endpoint: WebhookEndpoint,
    url: str = _UNCHANGED,
    events: list[str] = _UNCHANGED,
    group: int | None = _UNCHANGED,
    named_only: bool = _UNCHANGED,
    description: str = _UNCHANGED,
    enabled: bool = _UNCHANGED,
) -> WebhookEndpoint:
    """Change what is given; the rest stays. Enabling a disabled endpoint clears its reason
    and its count of failures (the owner says the receiver is back)."""
    changes: dict[str, Any] = {}
    if url is not _UNCHANGED:
        changes["url"] = _check_url(url, owner_id=endpoint.owner_id)
    if events is not _UNCHANGED:
        changes["events"] = _check_events(events)
    if group is not _UNCHANGED:
        changes["group"] = _check_group(endpoint.owner, group)
    if named_only is not _UNCHANGED:
        changes["named_only"] = bool(named_only)
    if description is not _UNCHANGED:
        changes["description"] = _check_description(description)
    if enabled is not _UNCHANGED:
        changes["enabled"] = bool(enabled)
        if enabled and not endpoint.enabled:
            changes.update(disabled_reason="", disabled_at=None, consecutive_failures=0)
        elif not enabled and endpoint.enabled:
            changes.update(disabled_reason="Disabled by you.", disabled_at=timezone.now())
    if changes:
        changes["updated_at"] = timezone.now()
        if not WebhookEndpoint.objects.filter(pk=endpoint.pk).update(**changes):
            raise _gone()
    endpoint.refresh_from_db()
    return endpoint


def webhook_endpoint_rotate_secret(*, endpoint: WebhookEndpoint) -> EndpointWithSecret:
    """A new signing secret, returned this once; every try from now on is signed with it."""
    secret = _new_secret()
    if not WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        secret_encrypted=_encrypt(secret), updated_at=timezone.now()
    ):
        raise _gone()
    endpoint.refresh_from_db()
    return EndpointWithSecret(endpoint=endpoint, secret=secret)


def webhook_endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    """Remove the endpoint with its deliveries; a try in flight finds it gone and stops."""
    WebhookEndpoint.objects.filter(pk=endpoint.pk).delete()


def webhook_endpoint_test(*, endpoint: WebhookEndpoint) -> WebhookDelivery:
    """Send a ``webhook.test`` event to the endpoint (whatever its events), as any other
    delivery: signed, logged, retried."""
    if not endpoint.enabled:
        raise ServiceError(
            "WEBHOOK_DISABLED", "This endpoint is disabled; enable it first.", status=409
        )
    now = timezone.now()
    payload = {
        "type": TEST_EVENT,
        "timestamp": now.isoformat(),
        "data": {"endpoint": endpoint.pk},
    }
    with transaction.atomic():
        (delivery,) = webhook_deliveries_create(
            [endpoint], TEST_EVENT, payload, request_id=None, at=now
        )
    return delivery


def _gone() -> ServiceError:
    return not_found("webhook endpoint")


def webhook_named_check(*, owner_id: int, group_id: int, endpoint_id: int | None) -> int | None:
    """The endpoint a script names on its message: the poster's own, for this group or for all
    of them (refused by name otherwise, and the message is not stored)."""
    if endpoint_id is None:
        return None
    found = WebhookEndpoint.objects.filter(
        Q(group__isnull=True) | Q(group_id=group_id), pk=endpoint_id, owner_id=owner_id
    ).exists()
    if not found:
        raise ServiceError(
            "WEBHOOK_NOT_FOUND",
            "You have no such webhook endpoint for this group.",
            field="webhook",
        )
    return endpoint_id
