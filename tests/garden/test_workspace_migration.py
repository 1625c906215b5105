"""A site with people and their data, migrated forward, gives each person their own workspace
with themselves its admin, in batches, once, with nothing of theirs changed."""

from __future__ import annotations

import importlib

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from garden.models import Agent, Workspace, WorkspaceMember

BEFORE = [("garden", "0022_beat_lease")]
BACKFILL = importlib.import_module("garden.migrations.0024_personal_workspaces")


def migrate_to(targets=None):
    executor = MigrationExecutor(connection)
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_a_populated_site_moves_into_personal_workspaces(monkeypatch):
    monkeypatch.setattr(BACKFILL, "BATCH", 2)  # five people: three batches
    old = migrate_to(BEFORE)
    assert ("garden", "workspace") not in {
        (m._meta.app_label, m._meta.model_name) for m in old.get_models()
    }
    User = old.get_model(settings.AUTH_USER_MODEL)
    people = [User.objects.create(username=f"person{n}") for n in range(5)]
    account = old.get_model("garden", "ModelAccount").objects.create(
        owner=people[0], name="scripted", provider="scripted"
    )
    old.get_model("garden", "Agent").objects.create(
        owner=people[0], handle="ledger", name="Ledger", model_account=account
    )

    migrate_to()

    for person in people:
        own = Workspace.objects.get(personal_for_id=person.pk)
        assert (own.kind, own.name) == ("personal", f"{person.username}'s workspace")
        assert list(own.members.values_list("user_id", "role")) == [(person.pk, "admin")]
    assert Workspace.objects.count() == WorkspaceMember.objects.count() == 5
    assert list(Agent.objects.values_list("owner_id", "handle")) == [(people[0].pk, "ledger")]

    # Run again (a migration stopped halfway and taken up again): nobody gets a second one.
    BACKFILL.personal_workspaces(_apps_now(), connection.schema_editor())
    assert Workspace.objects.count() == WorkspaceMember.objects.count() == 5


def _apps_now():
    executor = MigrationExecutor(connection)
    return executor.loader.project_state(executor.loader.graph.leaf_nodes()).apps
