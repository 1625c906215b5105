"""The deploy checks of a shared site (``manage.py check --deploy``) name every egress allowlist
entry that opens too much — a wide network, a metadata, loopback or link-local address, in any
of the three allowlists — and a Bot API URL at such an address; start-up refuses an entry that
is not one (naming it), and reads every entry as exactly what it says."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.validation import check_egress_and_keys
from garden import egress
from garden.checks import check_shared_site
from tests.garden.test_settings import ROOT
from tests.support.processes import manage


def _ids(settings, **values) -> dict[str, list[str]]:
    """The egress warnings for ``values``: {id: [messages]}."""
    for name in (
        "GARDEN_EGRESS_ALLOW",
        "GARDEN_EGRESS_ALLOW_PROVIDERS",
        "GARDEN_EGRESS_ALLOW_TELEGRAM",
    ):
        setattr(settings, name, values.get(name, []))
    settings.GARDEN_TELEGRAM_API_URL = values.get(
        "GARDEN_TELEGRAM_API_URL", "https://api.telegram.org"
    )
    found: dict[str, list[str]] = {}
    for warning in check_shared_site():
        if warning.id in {"garden.W003", "garden.W004", "garden.W005", "garden.W006"}:
            found.setdefault(warning.id, []).append(warning.msg)
    return found


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("0.0.0.0/0:80", {"garden.W003", "garden.W004", "garden.W005"}),
        ("[::]/0", {"garden.W003", "garden.W004", "garden.W005"}),
        ("::/0", {"garden.W003", "garden.W004", "garden.W005"}),
        ("10.0.0.0/7", {"garden.W003"}),
        ("169.254.169.254", {"garden.W004"}),
        ("[fd00:ec2::254]", {"garden.W004"}),
        ("::ffff:169.254.169.254", {"garden.W004"}),
        ("metadata.google.internal", {"garden.W004"}),
        ("127.0.0.1", {"garden.W005"}),
        ("127.0.0.0/8:11434", {"garden.W005"}),
        ("[::1]:8000", {"garden.W005"}),
        ("localhost", {"garden.W005"}),
        ("169.254.10.0/24", {"garden.W006"}),
        ("fe80::/64", {"garden.W006"}),
    ],
)
def test_an_allowlist_entry_that_opens_too_much_is_named(settings, entry, expected):
    for name in (
        "GARDEN_EGRESS_ALLOW",
        "GARDEN_EGRESS_ALLOW_PROVIDERS",
        "GARDEN_EGRESS_ALLOW_TELEGRAM",
    ):
        found = _ids(settings, **{name: ["ollama.internal:11434", entry]})
        assert set(found) == expected, (name, found)
        assert all(f"{name} allows {entry}" in m for msgs in found.values() for m in msgs)


def test_narrow_allowances_pass_the_deploy_checks(settings):
    assert (
        _ids(
            settings,
            GARDEN_EGRESS_ALLOW=["*.corp.example", "10.0.0.0/8", "fd12::/16"],
            GARDEN_EGRESS_ALLOW_PROVIDERS=["ollama.internal:11434", "192.168.1.20:8000"],
            GARDEN_EGRESS_ALLOW_TELEGRAM=["tg-bot-api.internal:8081"],
            GARDEN_TELEGRAM_API_URL="http://tg-bot-api.internal:8081",
        )
        == {}
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://169.254.169.254/", {"garden.W004"}),
        ("http://127.0.0.1:8081", {"garden.W005"}),
        ("http://[::1]:8081", {"garden.W005"}),
        ("http://localhost:8081", {"garden.W005"}),
    ],
)
def test_a_bot_api_url_at_an_inside_address_is_named(settings, url, expected):
    found = _ids(settings, GARDEN_TELEGRAM_API_URL=url)
    assert set(found) == expected, found
    assert all("GARDEN_TELEGRAM_API_URL" in m for msgs in found.values() for m in msgs)


@pytest.mark.parametrize(
    "entry", ["[::]x", "[::1", "[::1]:port", "2130706433", "1.2.3.999", "0x7f.1", "10.0.0.0/33"]
)
def test_start_up_refuses_a_malformed_entry_naming_it(entry):
    values = {
        "GARDEN_EGRESS_ALLOW": [],
        "GARDEN_EGRESS_ALLOW_PROVIDERS": [],
        "GARDEN_EGRESS_ALLOW_TELEGRAM": ["ok.example", entry],
        "GARDEN_TELEGRAM_API_URL": "https://api.telegram.org",
        "GARDEN_CREDENTIALS": "",
        "GARDEN_FERNET_KEYS": [],
    }
    with pytest.raises(ImproperlyConfigured) as refused:
        check_egress_and_keys(values)
    assert str(refused.value).startswith("GARDEN_EGRESS_ALLOW_TELEGRAM: ")
    assert repr(entry) in str(refused.value)


def test_a_bracketed_network_is_read_as_the_network_it_is():
    allow = egress.parse_allowlist(["[::]/0", "[fd00::]/8:8000"])
    assert allow.networks == (
        (ipaddress.ip_network("::/0"), None),
        (ipaddress.ip_network("fd00::/8"), 8000),
    )
    assert allow.holds(ipaddress.ip_address("2001:db8::1"), 1)


def test_check_deploy_names_a_wide_and_a_metadata_allowance(tmp_path):
    """The reported configuration, through ``manage.py check --deploy`` in production."""
    from cryptography.fernet import Fernet

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_DEBUG", "GARDEN_ALLOW_SCRIPTED_ACCOUNTS"}
    }
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "GARDEN_VAR_DIR": str(tmp_path),
            "GARDEN_ENV": "production",
            "DJANGO_SECRET_KEY": Fernet.generate_key().decode() * 2,
            "DJANGO_ALLOWED_HOSTS": "garden.example.com",
            "GARDEN_FERNET_KEYS": Fernet.generate_key().decode(),
            "GARDEN_EGRESS_ALLOW": "0.0.0.0/0:80,169.254.169.254",
        }
    )
    out = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = out.stdout + out.stderr
    assert out.returncode != 0
    for code in ("garden.W003", "garden.W004", "garden.W005"):
        assert code in report, report
    assert "GARDEN_EGRESS_ALLOW allows 169.254.169.254" in report
    env["GARDEN_EGRESS_ALLOW"] = "ok.example,[::]x"
    out = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0 and "GARDEN_EGRESS_ALLOW: " in out.stderr
    assert "'[::]x'" in out.stderr, out.stderr


@pytest.mark.parametrize(
    "name, value",
    [
        ("GARDEN_WEBHOOK_BACKOFF", [5.0, float("nan")]),
        ("GARDEN_WEBHOOK_BACKOFF", [float("inf")]),
        ("GARDEN_WEBHOOK_BACKOFF", [1e20]),
        ("GARDEN_WEBHOOK_BACKOFF", [-1.0]),
        ("GARDEN_WEBHOOK_TIMEOUT", 0.0),
        ("GARDEN_WEBHOOK_TIMEOUT", float("nan")),
        ("GARDEN_WEBHOOK_TIMEOUT", 1e9),
        ("GARDEN_WEBHOOK_MAX_ATTEMPTS", 0),
        ("GARDEN_WEBHOOK_RETRY_SECONDS", 0.0),
        ("GARDEN_WEBHOOK_DISABLE_AFTER", 0),
        ("GARDEN_MAX_WEBHOOKS_IN_FLIGHT_PER_OWNER", 0),
        ("GARDEN_WEBHOOK_MAX_PENDING_PER_OWNER", 0),
    ],
)
def test_a_webhook_setting_out_of_range_is_named_at_start_up(settings, name, value):
    from django.core.checks import run_checks

    setattr(settings, name, value)
    errors = [e for e in run_checks() if e.id == "garden.E012"]
    assert len(errors) == 1 and errors[0].msg.startswith(f"{name} ")


def test_the_default_webhook_settings_pass_the_check():
    from django.core.checks import run_checks

    assert not [e for e in run_checks() if e.id == "garden.E012"]


def test_a_metrics_directory_that_cannot_be_used_is_named_and_nothing_stops(tmp_path):
    """GARDEN_METRICS_DIR where a file stands: the process starts (its metrics its own) and the
    check names the setting."""
    taken = tmp_path / "a-file"
    taken.write_text("not a directory")
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "GARDEN_VAR_DIR": str(tmp_path),
            "GARDEN_METRICS_DIR": str(taken / "metrics"),
            "GARDEN_METRICS_TOKEN": "scrape-secret",
        }
    )
    out = manage(["check"], env)

    assert out.returncode == 0, out.stderr
    assert "garden.W007" in out.stderr + out.stdout
    assert "GARDEN_METRICS_DIR cannot be used" in out.stderr + out.stdout


@pytest.mark.parametrize(
    "token, debug, named",
    [
        ("metrics-secret-of-31-characters", False, True),
        ("a" * 40, False, True),  # long, but four distinct characters are guessable
        ("ab" * 20, False, True),
        ("4f1c9e0b7a2d4c6e8f0a1b3c5d7e9f1a", False, False),
        ("", False, False),  # no token: no /metrics, nothing to guess
        ("short", True, False),  # development
    ],
)
def test_a_short_metrics_token_is_named_in_production(settings, token, debug, named):
    from django.core.checks import run_checks

    settings.DEBUG = debug
    settings.GARDEN_METRICS_TOKEN = token
    found = [w for w in run_checks() if w.id == "garden.W008"]
    assert len(found) == named
    if named:
        assert "GARDEN_METRICS_TOKEN" in found[0].msg and token not in found[0].msg
