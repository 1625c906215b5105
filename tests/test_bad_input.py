"""Bad input never 500s: every API operation that takes a body answers characters the database
refuses, runaway nesting, numbers JSON should not carry and oversized bodies with the usual
400 shape (413 for size), and writes nothing. The operations come from the OpenAPI schema, so a
new route is covered the day it is added."""

from __future__ import annotations

import json

import pytest
from django.apps import apps
from django.test import Client

from tests.test_openapi import generate_schema, seed_rows, signed_in_headers

pytestmark = pytest.mark.django_db

POISON = {
    "nul in a key": '{"name": "x", "options": {"a\\u0000b": 1}, "text": "hi"}',
    "nul in a value": '{"name": "x\\u0000", "text": "a\\u0000b", "options": {"k": "\\u0000"}}',
    "nul deep in a list": '{"members": [1], "options": {"rules": [{"reply": "\\u0000"}]}}',
    "lone surrogate": '{"name": "\\ud800", "text": "\\udfff tail", "options": {"\\ud83d": 1}}',
    "deep nesting": '{"options": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "moderate nesting": '{"options": ' + '{"a": ' * 40 + "1" + "}" * 40 + "}",
    "NaN": '{"timeout_seconds": NaN, "text": "hi"}',
    "infinity": '{"timeout_seconds": 1e400, "text": "hi"}',
    "huge integer": '{"members": [100000000000000000000000000000], "coordinator": -99999999999999999999}',
    "not utf-8": b'{"text": "\xff\xfe"}',
    "not json": "{text: hi",
}


def body_operations() -> list[tuple[str, str]]:
    paths = generate_schema()["paths"]
    found = []
    for path, operations in paths.items():
        for method, operation in operations.items():
            if method in ("post", "patch", "put") and "requestBody" in operation:
                found.append((method, path))
    return sorted(found)


def row_counts() -> dict[str, int]:
    return {
        m._meta.label: m.objects.count()
        for app in ("garden", "groups", "missions")
        for m in apps.get_app_config(app).get_models()
    }


@pytest.fixture
def poisoner(django_user_model, settings):
    # Every body operation, eleven poisons over: far past the write rate, which this is not about.
    settings.GARDEN_THROTTLE_RATES = {}
    user = django_user_model.objects.create_user(username="poisoner", password="pw-poison-123")
    ids = seed_rows(user)
    headers = dict(h.split(": ", 1) for h in signed_in_headers(user))
    client = Client(HTTP_COOKIE=headers["Cookie"], HTTP_X_CSRFTOKEN=headers["X-CSRFToken"])
    return client, ids


def fill(path: str, ids: dict[str, list[int]]) -> str:
    for name, values in ids.items():
        path = path.replace("{" + name + "}", str(values[0]))
    return (
        path.replace("{approval_id}", "1")
        .replace("{mission_id}", "1")
        .replace("{account_id}", "1")
        .replace("{request_id}", "1")
    )


def test_the_schema_lists_the_body_operations_checked_here():
    assert len(body_operations()) >= 12


@pytest.mark.parametrize("poison", sorted(POISON))
def test_every_body_operation_refuses_poison_with_a_named_400(poisoner, poison):
    client, ids = poisoner
    before = row_counts()
    raw = POISON[poison]
    for method, path in body_operations():
        url = fill(path, ids)
        response = getattr(client, method)(url, data=raw, content_type="application/json")
        assert response.status_code in (400, 404), (
            method,
            url,
            response.status_code,
            response.content[:300],
        )
        if response.status_code == 400:
            body = response.json()
            assert body["code"] and isinstance(body["errors"], list), body
    assert row_counts() == before


def test_the_named_codes(poisoner):
    client, _ = poisoner
    expected = {
        "nul in a value": "INVALID_CHARACTER",
        "nul in a key": "INVALID_CHARACTER",
        "lone surrogate": "INVALID_CHARACTER",
        "deep nesting": "TOO_DEEP",
        "moderate nesting": "TOO_DEEP",
        "NaN": "INVALID_NUMBER",
        "infinity": "INVALID_NUMBER",
        "huge integer": "INVALID_NUMBER",
        "not utf-8": "INVALID_JSON",
        "not json": "INVALID_JSON",
    }
    for poison, code in expected.items():
        response = client.post("/api/groups", data=POISON[poison], content_type="application/json")
        assert (response.status_code, response.json()["code"]) == (400, code), poison


def test_an_oversized_body_is_a_413_and_writes_nothing(poisoner, settings):
    client, _ = poisoner
    before = row_counts()
    big = json.dumps({"name": "x", "text": "y" * (settings.GARDEN_API_MAX_BODY_BYTES + 10)})
    response = client.post("/api/groups", data=big, content_type="application/json")
    assert response.status_code == 413 and response.json()["code"] == "PAYLOAD_TOO_LARGE"
    assert row_counts() == before


def test_form_bodies_are_not_parsed(poisoner):
    client, _ = poisoner
    response = client.post("/api/groups", data={"name": "x\x00"})
    assert response.status_code == 415
