"""The OpenAPI schema: complete and valid, and every /api operation fuzzed by schemathesis
against a live server, signed in with a session and the CSRF pair, with no 5xx."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema

GROUP_OPERATIONS = {
    "/api/groups": {"get", "post"},
    "/api/groups/{group_id}": {"get", "patch", "delete"},
    "/api/groups/{group_id}/restore": {"post"},
    "/api/groups/{group_id}/clear": {"post"},
    "/api/groups/{group_id}/archive": {"post"},
}
HTTP_METHODS = {"get", "post", "put", "patch", "delete"}
FUZZ_SECONDS = int(os.environ.get("GARDEN_FUZZ_SECONDS", "30"))


def generate_schema() -> dict:
    GENERATOR_STATS.reset()
    schema = SchemaGenerator().get_schema(request=None, public=True)
    # Round-trip through JSON: what the schema view serves, without lazy strings.
    return json.loads(json.dumps(schema, default=str))


def api_routes() -> set[str]:
    """Every /api route in the URLconf, written the way OpenAPI writes paths."""
    found: set[str] = set()

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif (
                isinstance(pattern, URLPattern)
                and route.startswith("api/")
                and "schema" not in route
            ):
                for converter in ("int", "str", "slug"):
                    route = route.replace(f"<{converter}:", "{")
                found.add("/" + route.replace(">", "}"))

    walk(get_resolver().url_patterns, "")
    return found


def test_the_schema_is_valid_and_generated_without_warnings():
    schema = generate_schema()
    validate_schema(schema)
    assert not GENERATOR_STATS, "drf-spectacular warned or erred while generating the schema"


def test_every_success_response_describes_its_shape():
    """Output serializers on every route: no 2xx answer is documented as a bare object."""
    schema = generate_schema()
    vague = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if method not in HTTP_METHODS:
                continue
            for code, response in operation["responses"].items():
                body = response.get("content", {}).get("application/json", {}).get("schema")
                if code.startswith("2") and body is not None:
                    if not ({"$ref", "properties", "items"} & set(body)):
                        vague.append(f"{method.upper()} {path} {code}")
    assert vague == []


def test_the_schema_covers_every_api_route_and_the_group_operations():
    paths = generate_schema()["paths"]
    assert api_routes() <= set(paths), api_routes() - set(paths)
    for path, methods in GROUP_OPERATIONS.items():
        assert {m for m in paths[path] if m in HTTP_METHODS} == methods, path
    responses = paths["/api/groups/{group_id}/restore"]["post"]["responses"]
    assert {"200", "403", "404", "410"} <= set(responses)
    assert {"200", "400", "403", "404"} <= set(
        paths["/api/groups/{group_id}"]["patch"]["responses"]
    )
    group = generate_schema()["components"]["schemas"]["GroupOutput"]
    assert set(group["properties"]) == {
        "id",
        "name",
        "coordinator",
        "members",
        "room_cap_chars",
        "workspace",
        "owner",
        "memory_sentence",
        "created_at",
        "archived_at",
    }


@pytest.fixture
def private_broker():
    """Tasks the fuzzed requests enqueue stay in this process's memory: the shared
    filesystem queue under var/ is another test's worker's to consume, not ours."""
    from config.celery import app

    keys = ("broker_url", "broker_transport", "broker_transport_options")
    saved = {key: app.conf[key] for key in keys}
    # Celery's own after-fork reset: forget the pooled broker connections, so the next
    # publish connects with the new settings (app.close() would also unregister the app).
    app._after_fork()
    # The embedded default names its transport apart from the URL; memory:// replaces both.
    app.conf.update(broker_url="memory://", broker_transport=None, broker_transport_options={})
    try:
        yield
    finally:
        app._after_fork()
        app.conf.update(saved)


def signed_in_headers(user) -> list[str]:
    client = Client()
    client.force_login(user)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    token = _get_new_csrf_string()
    return [
        f"Cookie: {settings.SESSION_COOKIE_NAME}={session}; {settings.CSRF_COOKIE_NAME}={token}",
        f"X-CSRFToken: {token}",
    ]


def seed_rows(user) -> dict[str, list[int]]:
    """Real ids for the path parameters, so that fuzzing reaches existing rows too."""
    from garden.models import Agent, Conversation
    from garden.services.accounts import model_account_create, scripted_account_for
    from garden.services.agents import agent_create
    from groups.services.groups import group_create

    account = scripted_account_for(owner=user)
    members = [
        agent_create(owner=user, handle=h, name=h.title(), model_account=account).pk
        for h in ("ledger", "advisor")
    ]
    groups = [group_create(owner=user, name=f"Fuzz {n}", members=members).pk for n in range(3)]
    concierge = Agent.objects.get(owner=user, builtin="concierge")
    conversations = [Conversation.objects.create(owner=user, agent=concierge).pk for _ in range(2)]
    accounts = [
        model_account_create(
            owner=user, name="fuzzed", provider="openai", model="m", api_key="sk-fuzz"
        ).pk,
        account.pk,
    ]
    return {"group_id": groups, "conversation_id": conversations, "account_id": accounts}


@pytest.mark.timeout(FUZZ_SECONDS * 5)
def test_fuzzing_every_api_operation_finds_no_server_error(
    live_server, django_user_model, private_broker, tmp_path: Path
):
    user = django_user_model.objects.create_user(username="fuzzer", password="pw-fuzzer-123")
    ids = seed_rows(user)
    config = tmp_path / "schemathesis.toml"
    lines = []
    for name, values in ids.items():
        lines += [f"[dictionaries.{name}]", f"values = {values}", ""]
    lines.append("[parameters]")
    lines += [f'"path.{name}" = {{ dictionary = "{name}", probability = 0.5 }}' for name in ids]
    config.write_text("\n".join(lines) + "\n")

    executable = Path(sys.executable).with_name("schemathesis")
    # Bounded: at most 20 generated cases per operation, a 30 s budget for the whole run
    # (which schemathesis fills, repeating fuzzing), a fixed seed, one request at a time.
    command = [
        str(executable),
        "--no-color",
        "--config-file",
        str(config),
        "run",
        f"{live_server.url}/api/schema/?format=json",
        "--url",
        live_server.url,
        "--checks",
        "not_a_server_error",
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        os.environ.get("GARDEN_FUZZ_EXAMPLES", "20"),
        "--max-time",
        str(FUZZ_SECONDS),
        "--seed",
        "20261130",
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--generation-database",
        "none",
        "--suppress-health-check",
        "all",
    ]
    for header in signed_in_headers(user):
        command += ["--header", header]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": ""}
    run = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=FUZZ_SECONDS * 4
    )
    output = run.stdout + run.stderr
    (tmp_path / "schemathesis.out").write_text(output)
    assert run.returncode == 0, output[-8000:]

    # Every /api operation in the schema was exercised, garden's and the groups' alike.
    paths = generate_schema()["paths"]
    operations = sum(
        len(set(ops) & HTTP_METHODS) for path, ops in paths.items() if path.startswith("/api/")
    )
    assert operations >= 16
    assert f"Selected: {operations}/{operations}" in output, output[-4000:]
    assert f"Tested: {operations}" in output, output[-4000:]
