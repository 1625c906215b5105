"""An owner's Agent Father made before its offline script moves off the shared offline account
onto a script of its own, the one a new owner's maker gets; a maker on another account stays."""

from __future__ import annotations

import importlib

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from garden.models import Agent
from garden.services.maker_script import MAKER_SCRIPT, MAKER_SCRIPT_ACCOUNT_NAME

BEFORE = [("garden", "0020_message_stopped_at")]


def _migrate(targets=None):
    executor = MigrationExecutor(connection)
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def test_the_migrations_frozen_script_is_the_one_new_makers_get():
    migration = importlib.import_module("garden.migrations.0021_agent_father_offline_script")
    assert (migration.SCRIPT, migration.NAME) == (MAKER_SCRIPT, MAKER_SCRIPT_ACCOUNT_NAME)


@pytest.mark.django_db(transaction=True)
def test_an_earlier_agent_father_gets_its_own_offline_script():
    old = _migrate(BEFORE)
    User = old.get_model(settings.AUTH_USER_MODEL)
    Account = old.get_model("garden", "ModelAccount")
    OldAgent = old.get_model("garden", "Agent")
    makers = {}
    for name in ("before", "own-model"):
        user = User.objects.create(username=name)
        shared = Account.objects.create(
            owner=user, name="Scripted (offline)", provider="scripted", model="scripted"
        )
        account = shared
        if name == "own-model":
            account = Account.objects.create(owner=user, name="Mine", provider="scripted")
        makers[name] = OldAgent.objects.create(
            owner=user, builtin="maker", handle="father", name="Agent Father", model_account=account
        ).pk
        OldAgent.objects.create(
            owner=user, builtin="concierge", handle="concierge", name="C", model_account=shared
        )
    _migrate()
    moved = Agent.objects.select_related("model_account").get(pk=makers["before"])
    assert moved.model_account.name == MAKER_SCRIPT_ACCOUNT_NAME
    assert moved.model_account.options == MAKER_SCRIPT
    concierge = Agent.objects.get(owner_id=moved.owner_id, builtin="concierge")
    assert concierge.model_account.name == "Scripted (offline)"
    assert concierge.model_account.options in ({}, None)
    kept = Agent.objects.select_related("model_account").get(pk=makers["own-model"])
    assert kept.model_account.name == "Mine"
