"""How a failed model call is named: every way an HTTP exchange with a provider can fail (a
transport error, an error status) as the ProviderError subclass that says whether the model
could have run, and the account's key kept out of the message."""

from __future__ import annotations

import email.utils
import socket
import ssl
import time

import httpx

from .types import (
    AmbiguousFailure,
    ConfirmedRejection,
    ProviderAuthFailed,
    ProviderConnectionLost,
    ProviderConnectTimeout,
    ProviderNameNotFound,
    ProviderNotFound,
    ProviderRateLimited,
    ProviderServerError,
    ProviderTimeout,
    ProviderTlsFailed,
    ProviderUnreachable,
)

# 4xx answers the provider gives without running the model. Any other 4xx is treated as
# ambiguous, because an unknown status is not proof that no work was done.
REJECTION_STATUSES = frozenset({400, 401, 403, 404, 409, 413, 422, 429})

# How much of an error body to keep in the exception message: enough to read the provider's
# explanation, not enough to flood logs.
_ERROR_SNIPPET = 500


def classify_exception(exc: httpx.HTTPError, provider: str) -> Exception:
    """Map a transport exception to a ProviderError, by whether the request could have run."""
    # ConnectTimeout is a TimeoutException too, so it must be tested before the timeout branch:
    # a connection that never opened carried no request.
    if isinstance(exc, httpx.ConnectTimeout):
        return ProviderConnectTimeout(f"{provider}: could not connect in time: {exc!r}")
    if isinstance(exc, httpx.ConnectError):
        return _connect_failure(exc)(f"{provider}: could not connect: {exc!r}")
    if isinstance(exc, httpx.TimeoutException):
        return ProviderTimeout(f"{provider}: timed out: {exc!r}")
    if isinstance(exc, (httpx.NetworkError, httpx.RemoteProtocolError)):
        return ProviderConnectionLost(f"{provider}: connection lost: {exc!r}")
    return AmbiguousFailure(f"{provider}: transport failure: {exc!r}")


def _connect_failure(exc: httpx.ConnectError) -> type[ConfirmedRejection]:
    """Which refusal a connection that never carried a request was, from its causes."""
    chain, cause = [], exc
    while cause is not None and len(chain) < 10:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    if any(isinstance(c, ssl.SSLError) for c in chain) or "SSL" in str(exc):
        return ProviderTlsFailed
    if any(isinstance(c, socket.gaierror) for c in chain) or "cannot resolve" in str(exc):
        return ProviderNameNotFound
    return ProviderUnreachable


def check_status(status: int, headers: httpx.Headers, body: bytes, provider: str) -> None:
    """Raise the ProviderError for a non-2xx response; return quietly for a 2xx."""
    if 200 <= status < 300:
        return
    message = f"{provider}: HTTP {status}: {snippet(body)}"
    if status == 429:
        raise ProviderRateLimited(message, status=status, retry_after=parse_retry_after(headers))
    if status in (401, 403):
        raise ProviderAuthFailed(message, status=status)
    if status == 404:
        raise ProviderNotFound(message, status=status)
    if status in REJECTION_STATUSES:
        raise ConfirmedRejection(message, status=status)
    if status >= 500:
        raise ProviderServerError(message, status=status)
    # 408 and any other status (unknown 4xx, a redirect we do not follow) lands here.
    raise AmbiguousFailure(message, status=status)


def parse_retry_after(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def redact(exc: BaseException, secret: str) -> None:
    """Blank ``secret`` out of ``exc``'s message in place: an error body that echoes the key
    must not carry it into logs, notices or the account test."""
    if secret and any(secret in str(arg) for arg in exc.args):
        exc.args = tuple(str(arg).replace(secret, "[redacted]") for arg in exc.args)


def snippet(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace").strip().replace("\n", " ")
    return text[:_ERROR_SNIPPET] or "<empty body>"
