"""System checks for a shared deployment (``manage.py check --deploy``)."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings
from django.core.checks import Tags, Warning, register


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
    for name in ("GARDEN_EGRESS_ALLOW", "GARDEN_EGRESS_ALLOW_PROVIDERS"):
        for entry in getattr(settings, name):
            try:
                network = ipaddress.ip_network(entry.strip().strip("[]"), strict=False)
            except ValueError:
                continue
            if network.prefixlen < (8 if network.version == 4 else 16):
                found.append(
                    Warning(
                        f"{name} allows {entry}: most of the internal network is reachable by "
                        "what owners configure.",
                        hint="Name the hosts or small networks needed.",
                        id="garden.W003",
                    )
                )
    return found
