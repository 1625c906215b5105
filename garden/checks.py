"""System checks for a shared deployment (``manage.py check --deploy``)."""

from __future__ import annotations

import ipaddress
import math
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from garden.egress import METADATA_NETWORKS, Network, parse_allowlist
from garden.metrics_dir import usable_directory
from garden.pricing import parse_overrides
from garden.tools.mcp_operator import parse_operator_servers


@register(Tags.security, deploy=True)
def check_shared_site(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    found: list[Warning] = []
    if not settings.GARDEN_FERNET_KEYS:
        found.append(
            Warning(
                "GARDEN_FERNET_KEYS is not set: owners cannot store their own API keys (pasting "
                "one is refused), and in development keys are derived from SECRET_KEY.",
                hint="Generate one with Fernet.generate_key() and set GARDEN_FERNET_KEYS.",
                id="garden.W001",
            )
        )
    if settings.GARDEN_ALLOW_SCRIPTED_ACCOUNTS:
        found.append(
            Warning(
                "GARDEN_ALLOW_SCRIPTED_ACCOUNTS is on: ordinary users may create scripted "
                "(offline, demo) model accounts.",
                id="garden.W002",
            )
        )
    found += egress_allowlist_warnings()
    return found


_ALLOWLISTS = (
    "GARDEN_EGRESS_ALLOW",
    "GARDEN_EGRESS_ALLOW_PROVIDERS",
    "GARDEN_EGRESS_ALLOW_TELEGRAM",
    "GARDEN_EGRESS_ALLOW_MCP",
    "GARDEN_EGRESS_ALLOW_WEBHOOK",
)
_LOOPBACK: tuple[Network, ...] = (
    ipaddress.ip_network("127.0.0.0/8"),
    ipaddress.ip_network("0.0.0.0/32"),
    ipaddress.ip_network("::1/128"),
    ipaddress.ip_network("::/128"),
)
_LINK_LOCAL: tuple[Network, ...] = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
)
# Names that are the machine itself or a metadata service wherever garden runs.
_LOOPBACK_NAMES = ("localhost",)
_METADATA_NAMES = ("metadata.google.internal", "metadata.goog", "instance-data")


def _v6_forms(network: Network) -> tuple[Network, ...]:
    """``network`` and, for IPv4, the IPv6 networks that carry it (mapped, NAT64), which the
    policy unwraps to the same addresses."""
    if network.version == 6:
        return (network,)
    base, length = int(network.network_address), network.prefixlen + 96
    return (
        network,
        ipaddress.IPv6Network((0xFFFF00000000 | base, length)),
        ipaddress.IPv6Network((0x0064FF9B << 96 | base, length)),
    )


def _touches(network: Network, classes: tuple[Network, ...]) -> bool:
    return any(
        network.overlaps(form)
        for cls in classes
        for form in _v6_forms(cls)
        if form.version == network.version
    )


def _entry_warnings(reach: str, entry: str) -> list[Warning]:
    """What is dangerous about one allowlist entry (it parsed: start-up refuses junk);
    ``reach`` names where it comes from."""
    allow = parse_allowlist([entry])
    found: list[Warning] = []
    for network, _port in allow.networks:
        if network.prefixlen < (8 if network.version == 4 else 16):
            found.append(
                Warning(
                    f"{reach}: most of the internal network (or all of it) is reachable by "
                    "what owners configure.",
                    hint="Name the hosts or small networks needed.",
                    id="garden.W003",
                )
            )
        if _touches(network, METADATA_NETWORKS):
            found.append(
                Warning(
                    f"{reach}, which holds a cloud metadata address: what owners configure "
                    "could read the machine's cloud credentials.",
                    hint="Remove it; no model server or tool lives at a metadata address.",
                    id="garden.W004",
                )
            )
        elif _touches(network, _LINK_LOCAL):
            found.append(
                Warning(
                    f"{reach}, which holds link-local addresses (where metadata services and "
                    "unconfigured devices answer).",
                    hint="Name the one address needed, or remove it.",
                    id="garden.W006",
                )
            )
        if _touches(network, _LOOPBACK):
            found.append(
                Warning(
                    f"{reach}, which holds loopback addresses: what owners configure could "
                    "reach every service on the machine garden runs on (its database, Redis).",
                    hint="Allow the one address and port of the local model server "
                    "(127.0.0.1:11434), not the machine.",
                    id="garden.W005",
                )
            )
    names = [h for h, _ in allow.hosts] + [s.lstrip(".") for s, _ in allow.suffixes]
    for name in names:
        if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
            found.append(
                Warning(
                    f"{reach}, a loopback name; it opens the machine itself only if the "
                    "address is allowed too.",
                    hint="Allow the address and port of the local server (127.0.0.1:11434).",
                    id="garden.W005",
                )
            )
        if name in _METADATA_NAMES:
            found.append(
                Warning(
                    f"{reach}, a cloud metadata service's name.",
                    hint="Remove it; no model server or tool lives there.",
                    id="garden.W004",
                )
            )
    return found


def egress_allowlist_warnings() -> list[Warning]:
    """Every egress allowlist entry that opens too much, and a Bot API URL at a loopback,
    link-local or metadata address (which only an allowlist entry would let through)."""
    found: list[Warning] = []
    for setting in _ALLOWLISTS:
        for entry in getattr(settings, setting):
            if entry.strip():
                found += _entry_warnings(f"{setting} allows {entry.strip()}", entry)
    url = settings.GARDEN_TELEGRAM_API_URL
    host = (urlsplit(url).hostname or "").rstrip(".")
    try:
        ipaddress.ip_address(host)
        literal = True
    except ValueError:
        literal = False
    if literal or host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        found += [
            w
            for w in _entry_warnings(f"GARDEN_TELEGRAM_API_URL is {url}", host)
            if w.id != "garden.W003"
        ]
    return found


@register()
def check_mcp_servers(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """GARDEN_MCP_SERVERS is read at every use; a malformed one is named at start-up."""
    try:
        parse_operator_servers(settings.GARDEN_MCP_SERVERS)
    except ValueError as exc:
        return [Error(f"GARDEN_MCP_SERVERS: {exc}", id="garden.E010")]
    return []


@register()
def check_model_prices(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """GARDEN_MODEL_PRICES is read at every priced call; a malformed one is named at start-up
    rather than leaving calls priced from the table alone."""
    try:
        parse_overrides(settings.GARDEN_MODEL_PRICES)
    except ValueError as exc:
        return [Error(f"GARDEN_MODEL_PRICES: {exc}", id="garden.E011")]
    return []


# The longest pause between webhook tries (groups.services.webhook_sending.MAX_BACKOFF), and the
# longest a try may hold a worker thread.
_WEBHOOK_MAX_PAUSE = 86400.0
_WEBHOOK_MAX_TIMEOUT = 120.0


def _webhook_problems() -> list[tuple[str, str]]:
    """(setting, what is wrong) for each webhook setting out of its range."""
    found: list[tuple[str, str]] = []
    steps = settings.GARDEN_WEBHOOK_BACKOFF
    bad = [s for s in steps if not (isinstance(s, int | float) and 0 <= s <= _WEBHOOK_MAX_PAUSE)]
    if bad:
        found.append(
            (
                "GARDEN_WEBHOOK_BACKOFF",
                f"each pause is seconds from 0 to {_WEBHOOK_MAX_PAUSE:g}, not {bad[0]!r}",
            )
        )
    timeout = settings.GARDEN_WEBHOOK_TIMEOUT
    if not (isinstance(timeout, int | float) and 0 < timeout <= _WEBHOOK_MAX_TIMEOUT):
        found.append(
            (
                "GARDEN_WEBHOOK_TIMEOUT",
                f"is seconds above 0 and at most {_WEBHOOK_MAX_TIMEOUT:g}, not {timeout!r}",
            )
        )
    retry = settings.GARDEN_WEBHOOK_RETRY_SECONDS
    if not (isinstance(retry, int | float) and math.isfinite(retry) and retry > 0):
        found.append(("GARDEN_WEBHOOK_RETRY_SECONDS", f"is seconds above 0, not {retry!r}"))
    for name in (
        "GARDEN_WEBHOOK_MAX_ATTEMPTS",
        "GARDEN_WEBHOOK_DISABLE_AFTER",
        "GARDEN_MAX_WEBHOOKS_IN_FLIGHT_PER_OWNER",
        "GARDEN_WEBHOOK_MAX_PENDING_PER_OWNER",
    ):
        value = getattr(settings, name)
        if not (isinstance(value, int) and value >= 1):
            found.append((name, f"is a whole number of at least 1, not {value!r}"))
    return found


@register()
def check_webhook_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """The webhook settings are read at every try; one out of range (a pause that cannot be
    scheduled, a try that never ends or never may run) is named at start-up."""
    return [Error(f"{name} {problem}.", id="garden.E012") for name, problem in _webhook_problems()]


@register()
def check_metrics_directory(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    """GARDEN_METRICS_DIR must be a directory this process can write: else its samples stay its
    own (a scrape of another process on the host does not see them)."""
    directory = settings.GARDEN_METRICS_DIR
    problem = usable_directory(directory) if directory else ""
    if not problem:
        return []
    return [
        Warning(
            f"GARDEN_METRICS_DIR cannot be used ({problem}): this process's metrics are not "
            "shared with the host's /metrics.",
            hint="Point it at a directory (a tmpfs, emptied at start) every garden process of "
            "the host can write.",
            id="garden.W007",
        )
    ]


# As Django's own check of SECRET_KEY (security.W009): a secret too short, or of too few
# distinct characters, to stand up to guessing.
_METRICS_TOKEN_MIN_LENGTH = 32
_METRICS_TOKEN_MIN_CHARACTERS = 5


@register(Tags.security)
def check_metrics_token(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    """A GARDEN_METRICS_TOKEN set in production must be long and random: it is a bearer secret
    anyone who reaches /metrics (or a worker's metrics port) may guess at."""
    token = settings.GARDEN_METRICS_TOKEN
    if settings.DEBUG or not token:
        return []
    if len(token) >= _METRICS_TOKEN_MIN_LENGTH and len(set(token)) >= _METRICS_TOKEN_MIN_CHARACTERS:
        return []
    return [
        Warning(
            f"GARDEN_METRICS_TOKEN is shorter than {_METRICS_TOKEN_MIN_LENGTH} characters or has "
            f"fewer than {_METRICS_TOKEN_MIN_CHARACTERS} distinct ones: a guessable bearer "
            "secret for the site's metrics.",
            hint='Generate one with `python -c "import secrets; '
            'print(secrets.token_urlsafe(32))"`.',
            id="garden.W008",
        )
    ]


@register(Tags.database)
def check_idle_in_transaction_timeout(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[Warning]:
    """Behind a transaction pooler garden cannot set the server's idle-in-transaction timeout
    per connection: the role or the database must (run with ``migrate`` and
    ``check --database default``)."""
    if not settings.GARDEN_DB_TRANSACTION_POOLER or "default" not in (databases or ()):
        return []
    from django.db import connection

    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setting::bigint FROM pg_settings "
            "WHERE name = 'idle_in_transaction_session_timeout'"
        )
        (milliseconds,) = cursor.fetchone()
    wanted = settings.GARDEN_DB_IDLE_IN_TRANSACTION_SECONDS
    if milliseconds and milliseconds <= wanted * 1000:
        return []
    said = "off" if not milliseconds else f"{milliseconds / 1000:g} s"
    return [
        Warning(
            f"The database's idle_in_transaction_session_timeout is {said}; behind a transaction "
            "pooler (GARDEN_DB_TRANSACTION_POOLER) garden cannot set it per connection, so a "
            "stopped process's row locks would stall every step that needs them.",
            hint=f"ALTER ROLE <garden's role> SET idle_in_transaction_session_timeout = "
            f"'{wanted}s'; and set PgBouncer's idle_transaction_timeout = {wanted}.",
            id="garden.W009",
        )
    ]
