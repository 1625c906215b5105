"""docker-compose.yml and the Dockerfile read as an operator reads them (this machine has no
Docker engine or compose plugin to run ``docker compose config``): the stack fits
PostgreSQL's default connections, nothing starts before the tables exist, and the image runs
unprivileged, says its port and installs its dependencies before it copies the code."""

from __future__ import annotations

import json
import re
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


# The observability profile (deploy/observability/): an OpenTelemetry collector, Jaeger,
# Prometheus and Grafana beside the stack, read as an operator reads them.
OBSERVABILITY = ("otel-collector", "jaeger", "prometheus", "grafana")
DEPLOY = ROOT / "deploy" / "observability"
_QUERIED = re.compile(r"\bgarden_[a-z_]+\b")


def exposed_metric_names() -> set[str]:
    """Every sample name garden's metrics can expose: the recorded ones with their suffixes
    (counters _total, histograms _bucket/_count/_sum), and the gauges read at scrape time."""
    from garden import metrics

    names: set[str] = set()
    for family in metrics.REGISTRY.collect():
        if family.type == "counter":
            names.add(f"{family.name}_total")
        elif family.type == "histogram":
            names.update(f"{family.name}_{end}" for end in ("bucket", "count", "sum"))
        else:
            names.add(family.name)
    recorded = {family.name for family in metrics.REGISTRY.collect()}
    for path in (ROOT / "garden" / "metrics.py", ROOT / "groups" / "metrics.py"):
        found = set(re.findall(r'"(garden_[a-z_]+)"', path.read_text()))
        names.update(found - recorded)
    return names


def test_the_observability_services_start_only_with_their_profile(compose):
    services = compose["services"]
    for name in OBSERVABILITY:
        assert services[name]["profiles"] == ["observability"], name
    for name in ("postgres", "redis", "migrate", "web", "proxy", "worker", "beat"):
        assert "profiles" not in services[name], f"{name} would not start without the profile"
    for name in GARDEN:
        environment = services[name]["environment"]
        assert environment["GARDEN_METRICS_TOKEN"] == "${GARDEN_METRICS_TOKEN:-}", name
        assert environment["OTEL_EXPORTER_OTLP_ENDPOINT"] == "${OTEL_EXPORTER_OTLP_ENDPOINT:-}"
        assert ",web" in environment["DJANGO_ALLOWED_HOSTS"], "Prometheus asks for web:8000"


def test_every_file_the_profile_mounts_is_in_the_repository(compose):
    for name in OBSERVABILITY:
        for volume in compose["services"][name].get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), (name, source)


def test_prometheus_scrapes_web_and_every_worker_with_the_operators_bearer(compose):
    services = compose["services"]
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    secret = compose["secrets"]["metrics_token"]
    assert secret == {"environment": "GARDEN_METRICS_TOKEN"}
    assert "metrics_token" in services["prometheus"]["secrets"]
    for job in jobs.values():
        assert job["authorization"] == {
            "type": "Bearer",
            "credentials_file": "/run/secrets/metrics_token",
        }
    web = jobs["garden-web"]
    assert web["metrics_path"] == "/metrics"
    for target in web["static_configs"][0]["targets"]:
        host, port = target.split(":")
        assert host in services and f"{port}:{port}" in _published(services[host])[0]
    worker = jobs["garden-worker"]["dns_sd_configs"][0]
    assert worker["names"] == ["worker"] and "worker" in services
    assert str(worker["port"]) == services["worker"]["environment"]["GARDEN_METRICS_PORT"]
    assert services["worker"]["environment"]["GARDEN_METRICS_ADDR"] == "0.0.0.0"
    assert "/run/garden-metrics" in services["worker"]["tmpfs"]
    mounted = [v.split(":")[1] for v in services["prometheus"]["volumes"]]
    for rules in config["rule_files"]:
        assert rules in mounted, rules


def test_traces_go_from_the_collector_to_jaeger_and_grafana_reads_both(compose):
    services = compose["services"]
    collector = yaml.safe_load((DEPLOY / "collector.yaml").read_text())
    protocols = collector["receivers"]["otlp"]["protocols"]
    assert protocols["http"]["endpoint"].endswith(":4318")
    assert protocols["grpc"]["endpoint"].endswith(":4317")
    pipeline = collector["service"]["pipelines"]["traces"]
    assert pipeline["receivers"] == ["otlp"]
    for exporter in pipeline["exporters"]:
        host = collector["exporters"][exporter]["endpoint"].split(":")[0]
        assert host in services, exporter
    sources = yaml.safe_load((DEPLOY / "grafana" / "datasources.yaml").read_text())
    by_type = {source["type"]: source for source in sources["datasources"]}
    assert set(by_type) == {"prometheus", "jaeger"}
    for source in by_type.values():
        assert source["url"].split("//")[1].split(":")[0] in services
    providers = yaml.safe_load((DEPLOY / "grafana" / "dashboards.yaml").read_text())
    path = providers["providers"][0]["options"]["path"]
    assert any(v.endswith(f":{path}:ro") for v in services["grafana"]["volumes"])


def test_the_dashboard_and_the_alerts_query_only_metrics_garden_exposes():
    exposed = exposed_metric_names()
    dashboard = json.loads((DEPLOY / "dashboards" / "garden.json").read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len(panels) >= 20
    sources = yaml.safe_load((DEPLOY / "grafana" / "datasources.yaml").read_text())
    uids = {source["uid"] for source in sources["datasources"]}
    queried: set[str] = set()
    for panel in panels:
        assert panel["datasource"]["uid"] in uids, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            queried.update(_QUERIED.findall(target["expr"]))
    alerts = yaml.safe_load((DEPLOY / "alerts.yml").read_text())
    for rule in alerts["groups"][0]["rules"]:
        queried.update(_QUERIED.findall(rule["expr"]))
    assert queried - exposed == set()
    # Every metric is on the dashboard, and the operations guide says what each means.
    bases = {re.sub(r"_(total|bucket|count|sum)$", "", name) for name in exposed}
    shown = {re.sub(r"_(total|bucket|count|sum)$", "", name) for name in queried}
    assert bases - shown == set()
    guide = (ROOT / "docs" / "operations.md").read_text()
    assert [name for name in sorted(bases) if name not in guide] == []


# Secrets, health, limits and stopping: what an operator needs before a deploy is routine.
LONG_RUNNING = ("postgres", "redis", "web", "worker", "beat")
_PINNED = re.compile(r"^[^:]+:v?\d+\.\d+(\.\d+)?([-.][a-z0-9.-]+)?$")


def _dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_the_image_never_gets_the_operators_secrets_or_runtime_files():
    ignored = _dockerignore()
    for pattern in (".env", ".env.*", "var", "**/*.pem", "**/*.key"):
        assert pattern in ignored, pattern
    # an example of the file (no secrets in it) may still go in
    assert ignored.index(".env.*") < ignored.index("!.env.example")


def test_the_database_credentials_come_from_the_environment(compose):
    services = compose["services"]
    password = services["postgres"]["environment"]["POSTGRES_PASSWORD"]
    assert password.startswith("${POSTGRES_PASSWORD:?"), password
    for name in GARDEN:
        url = services[name]["environment"]["DATABASE_URL"]
        assert url.startswith("postgres://garden:${POSTGRES_PASSWORD:?"), (name, url)
        assert url.endswith("}@postgres:5432/garden"), (name, url)
    text = (ROOT / "docker-compose.yml").read_text()
    assert "garden:garden@" not in text and "POSTGRES_PASSWORD: garden" not in text
    assert "POSTGRES_PASSWORD" in (ROOT / "docs" / "operations.md").read_text()


def test_every_long_running_service_has_a_healthcheck(compose):
    services = compose["services"]
    for name in LONG_RUNNING:
        check = services[name].get("healthcheck")
        assert check and check["test"], name
        assert check["test"][0] in ("CMD", "CMD-SHELL"), name
    web = " ".join(services["web"]["healthcheck"]["test"])
    assert "http://127.0.0.1:8000/healthz" in web
    worker = " ".join(services["worker"]["healthcheck"]["test"])
    # $$: compose passes one $ on, so the shell in the container expands its own HOSTNAME
    assert "inspect ping" in worker and "celery@$$HOSTNAME" in worker
    assert "beat" in " ".join(services["beat"]["healthcheck"]["test"])


def test_every_service_rotates_its_logs_and_has_limits(compose):
    for name, service in compose["services"].items():
        logging = service.get("logging")
        assert logging and logging["driver"] == "json-file", name
        assert logging["options"]["max-size"] and int(logging["options"]["max-file"]) >= 2, name
        limits = service.get("deploy", {}).get("resources", {}).get("limits", {})
        assert limits.get("memory") and limits.get("cpus"), name
    # one anchor, shared: a change to the rotation changes it everywhere
    assert "x-logging: &logging" in (ROOT / "docker-compose.yml").read_text()
    assert len({str(service["logging"]) for service in compose["services"].values()}) == 1


def test_every_image_is_pinned_to_an_exact_version(compose):
    for name, service in compose["services"].items():
        if "image" not in service:
            continue
        assert _PINNED.match(service["image"]), (name, service["image"])
    base = next(
        line.split()[1]
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("FROM ")
    )
    assert re.match(r"^python:3\.\d+\.\d+-", base), base


def _seconds(duration: str) -> float:
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([hms])", duration))


def test_a_stopping_worker_has_time_to_finish_its_step(compose, settings):
    services = compose["services"]
    step = settings.GARDEN_MODEL_CALL_TIMEOUT + settings.GARDEN_TOOLS_SECONDS_PER_STEP
    assert _seconds(services["worker"]["stop_grace_period"]) >= step
    assert _seconds(services["web"]["stop_grace_period"]) > 10  # Docker's default
    for name in ("web", "worker", "beat"):
        # exec form: the process itself gets SIGTERM, no shell in between to swallow it
        assert isinstance(services[name]["command"], list), name
        assert services[name]["command"][0] != "sh", name
        assert services[name]["init"] is True, name
    assert "stop_grace_period" in (ROOT / "docs" / "operations.md").read_text()
    assert "terminationGracePeriodSeconds" in (ROOT / "docs" / "operations.md").read_text()
