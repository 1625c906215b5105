"""Scripted accounts on a shared site: bounded when saved, and offered to ordinary users only
where the operator allows it (on in development, off in production)."""

import pytest

from garden.models import ModelAccount

pytestmark = pytest.mark.django_db


def post(api, **fields):
    return api.post("/api/model-accounts", {"name": "s", "provider": "scripted", **fields})


def test_a_delay_as_long_as_the_timeout_is_refused_and_nothing_is_stored(api, settings):
    settings.GARDEN_MODEL_CALL_TIMEOUT = 60
    before = ModelAccount.objects.count()
    for options, timeout in (({"delay": 3600}, 60), ({"delay": 10}, 10), ({"delay": 90}, 600)):
        response = post(api, options=options, timeout_seconds=timeout)
        assert response.status_code == 400, response.content
        error = response.json()["errors"][0]
        assert (error["field"], error["code"]) == ("options", "SCRIPT_DELAY_TOO_LONG")
    assert ModelAccount.objects.count() == before
    assert post(api, options={"delay": 0.5}).status_code == 201


def test_a_script_outside_the_schema_is_a_named_400(api):
    response = post(api, options={"rules": [{"when": "x", "regex": "^(a+)+$"}]})
    assert response.status_code == 400
    assert response.json()["errors"][0]["code"] == "INVALID_SCRIPT"
    assert "regex" in response.json()["errors"][0]["message"]


def test_production_offers_scripted_accounts_to_staff_only(api, settings, admin_client, owner):
    settings.GARDEN_ALLOW_SCRIPTED_ACCOUNTS = False
    response = post(api)
    assert response.status_code == 400
    assert response.json()["errors"][0]["code"] == "SCRIPTED_NOT_ALLOWED"
    made = admin_client.post(
        "/admin/garden/modelaccount/add/",
        {
            "owner": owner.pk,
            "name": "demo script",
            "provider": "scripted",
            "model": "scripted",
            "base_url": "",
            "credential": "",
            "timeout_seconds": "60",
            "options": '{"default": "Hello from staff."}',
        },
    )
    assert made.status_code == 302, made.content.decode()[:3000]
    assert ModelAccount.objects.filter(name="demo script", owner=owner).exists()


def test_the_default_is_on_in_development_and_off_in_production(monkeypatch):
    import subprocess
    import sys

    code = (
        "import django,os; django.setup(); from django.conf import settings; "
        "print(settings.GARDEN_ALLOW_SCRIPTED_ACCOUNTS)"
    )
    base = {"DJANGO_SETTINGS_MODULE": "config.settings", "PATH": "/usr/bin:/bin"}
    import os

    base["GARDEN_VAR_DIR"] = os.environ.get("GARDEN_VAR_DIR", "/tmp")
    dev = subprocess.run([sys.executable, "-c", code], env=base, capture_output=True, text=True)
    prod = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={
            **base,
            "GARDEN_ENV": "production",
            "DJANGO_SECRET_KEY": "x" * 60,
            "DJANGO_ALLOWED_HOSTS": "garden.example",
        },
    )
    assert dev.stdout.strip() == "True", dev.stderr
    assert prod.stdout.strip() == "False", prod.stderr


def test_after_tool_error_tells_a_refusal_from_a_result():
    from garden.providers.scripted import ScriptedProvider
    from garden.providers.types import AccountConfig, ChatMessage, ChatRequest, ToolResult

    provider = ScriptedProvider(
        AccountConfig(
            provider="scripted",
            model="scripted",
            options={
                "rules": [
                    {"after_tool_error": True, "reply": "Understood: I won't write it."},
                    {"after_tool_result": True, "reply": "Saved."},
                ]
            },
        )
    )

    def answer(is_error: bool) -> str:
        result = ToolResult(
            call_id="c1", content="REJECTED" if is_error else "ok", is_error=is_error
        )
        return provider.complete(
            ChatRequest(system="", messages=(ChatMessage("user", (result,)),))
        ).text

    assert answer(True) == "Understood: I won't write it."
    assert answer(False) == "Saved."
