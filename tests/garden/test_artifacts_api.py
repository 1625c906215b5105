"""The owner's documents (GET /api/artifacts, DELETE /api/artifacts/:id): every artifact they
keep, with its size, agent and conversation (or "no conversation"), and their storage against
the limit; deleted by the owner alone (another owner's is 404)."""

from __future__ import annotations

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from garden.models import Artifact
from garden.services.artifacts import artifact_delete
from garden.storage import storage_usage
from garden.tools import run_tool
from tests.conftest import CsrfClient
from tests.garden.test_storage import ctx_for, fill

pytestmark = pytest.mark.django_db


def test_the_owners_documents_are_listed_with_size_and_origin(api, owner, stranger):
    ctx = ctx_for(owner)
    written = run_tool(ctx, "file.write", {"title": "Plan", "content": "Save 800 \u20ac"})
    assert not written.is_error
    orphan = fill(owner, 42)
    fill(stranger, 7)
    body = api.get("/api/artifacts").json()
    rows = body["artifacts"]
    assert [r["title"] for r in rows] == ["Filler", "Plan"]
    assert rows[0]["conversation"] is None and rows[0]["where"] == "no conversation"
    assert rows[0]["id"] == orphan.pk and rows[0]["size"] == 42
    plan = rows[1]
    assert (
        plan["size"] == len("Save 800 \u20ac".encode()) and plan["agent"]["handle"] == "concierge"
    )
    assert (
        plan["conversation"]["id"] == ctx.conversation_id and plan["where"] == "1:1 with @concierge"
    )
    assert not plan["attached"] and body["next_before"] is None
    assert body["usage"]["artifacts"] == 42 + plan["size"]
    assert body["usage"]["total"] == storage_usage(owner_id=owner.pk).total
    assert body["usage"]["limit"] > 0
    page = api.get("/api/artifacts", {"limit": 1}).json()
    assert [r["title"] for r in page["artifacts"]] == ["Filler"]
    rest = api.get("/api/artifacts", {"limit": 1, "before": page["next_before"]}).json()
    assert [r["title"] for r in rest["artifacts"]] == ["Plan"]
    bad = api.get("/api/artifacts", {"limit": 0})
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "limit"


def test_only_the_owner_deletes_a_document(api, owner, stranger):
    mine = fill(owner, 500)
    theirs = fill(stranger, 300)
    other = APIClient(enforce_csrf_checks=True)
    other.force_login(stranger)
    other = CsrfClient(other)
    refused = other.delete(f"/api/artifacts/{mine.pk}")
    assert refused.status_code == 404 and refused.json()["code"] == "NOT_FOUND"
    assert Artifact.objects.filter(pk=mine.pk).exists()
    assert other.get("/api/artifacts").json()["artifacts"][0]["id"] == theirs.pk
    assert api.delete(f"/api/artifacts/{theirs.pk}").status_code == 404
    assert api.delete("/api/artifacts/99999999").status_code == 404
    assert api.delete(f"/api/artifacts/{mine.pk}").status_code == 204
    assert not Artifact.objects.filter(pk=mine.pk).exists()
    assert storage_usage(owner_id=owner.pk).artifacts == 0
    assert api.delete(f"/api/artifacts/{mine.pk}").status_code == 404


def test_a_deleted_document_frees_room_for_the_next(owner, settings):
    settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER = 10_000
    filler = fill(owner, 9_990)
    ctx = ctx_for(owner)
    assert run_tool(ctx, "file.write", {"title": "R", "content": "x" * 20}).code == "STORAGE_FULL"
    with transaction.atomic():
        artifact_delete(owner=owner, artifact_id=filler.pk)
    assert not run_tool(ctx, "file.write", {"title": "R", "content": "x" * 20}).is_error
