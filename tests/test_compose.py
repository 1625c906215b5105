"""docker-compose.yml and the Dockerfile read as an operator reads them (this machine has no
Docker engine or compose plugin to run ``docker compose config``): the stack fits
PostgreSQL's default connections, nothing starts before the tables exist, and the image runs
unprivileged, says its port and installs its dependencies before it copies the code."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
GARDEN = ("migrate", "web", "worker", "beat")
POSTGRES_DEFAULT_MAX_CONNECTIONS = 100


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_web_three_workers_and_beat_fit_postgres_default_connections_with_room(compose):
    pools = {
        name: int(compose["services"][name]["environment"]["GARDEN_DB_POOL_MAX"]) for name in GARDEN
    }
    assert all(0 < size <= 8 for size in pools.values()), pools  # docs: 4-8 per worker
    # migrate runs once, before the others; it is counted anyway.
    used = pools["migrate"] + pools["web"] + 3 * pools["worker"] + pools["beat"]
    assert used <= POSTGRES_DEFAULT_MAX_CONNECTIONS // 2, pools


def test_nothing_that_uses_the_tables_starts_before_migrate_has_finished(compose):
    services = compose["services"]
    migrate = services["migrate"]
    assert "migrate" in migrate["command"] and migrate["restart"] == "no"
    for name in ("web", "worker", "beat"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["postgres"]["condition"] == "service_healthy", name
        assert "migrate" not in services[name]["command"], f"{name} migrates on its own"
    for name in GARDEN:
        environment = services[name]["environment"]
        assert environment["GARDEN_ENV"] == "production"
        assert environment["DJANGO_SECRET_KEY"].startswith("${DJANGO_SECRET_KEY:?")


def test_the_image_runs_unprivileged_says_its_port_and_caches_its_dependencies():
    lines = [
        line.strip()
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    instructions = [line.split()[0] for line in lines if line.split()[0].isupper()]
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0"), "the image runs as root"
    assert "EXPOSE 8000" in lines
    copy_code = lines.index("COPY . /app")
    install_deps = next(i for i, line in enumerate(lines) if "pip install" in line)
    assert install_deps < copy_code, "every code change would reinstall every dependency"
    assert lines.index("COPY pyproject.toml /app/") < install_deps
    assert instructions.index("USER") > copy_code


def test_the_readme_says_how_to_create_the_first_user(compose):
    text = (ROOT / "README.md").read_text() + (ROOT / "docker-compose.yml").read_text()
    assert "docker compose run --rm web python manage.py createsuperuser" in text


def _published(service: dict) -> list[str]:
    return [str(p) for p in service.get("ports", [])]


def test_only_the_tls_proxy_is_published_beyond_loopback(compose):
    services = compose["services"]
    # web: loopback only (host:port:container), never plain HTTP on every interface.
    assert _published(services["web"]) == ["127.0.0.1:8000:8000"]
    for name, service in services.items():
        if name == "proxy":
            continue
        for port in _published(service):
            assert port.startswith("127.0.0.1:"), (name, port)
    proxy = services["proxy"]
    assert "443:443" in _published(proxy)
    assert "--to web:8000" in proxy["command"] and "reverse-proxy" in proxy["command"]
    assert "web" in proxy["depends_on"]
    assert "caddy" in compose["volumes"]  # certificates survive a restart


def test_garden_trusts_the_proxy_and_speaks_https_by_default(compose):
    for name in GARDEN:
        environment = compose["services"][name]["environment"]
        assert environment["GARDEN_HTTPS"] == "${GARDEN_HTTPS:-true}", name
        assert environment["GARDEN_BEHIND_PROXY"] == "${GARDEN_BEHIND_PROXY:-true}", name
        assert "GARDEN_DOMAIN" in environment["DJANGO_ALLOWED_HOSTS"], name


def test_the_operations_guide_says_how_to_put_a_tls_proxy_in_front():
    text = (ROOT / "docs" / "operations.md").read_text()
    for needed in (
        "GARDEN_DOMAIN",
        "GARDEN_BEHIND_PROXY",
        "SECURE_PROXY_SSL_HEADER",
        "X-Forwarded-Proto",
        "X-Forwarded-For",
        "127.0.0.1:8000",
    ):
        assert needed in text, needed
