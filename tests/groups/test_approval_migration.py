"""Approval moved from garden to groups with its table: a database at the migrations before
the move keeps its approval rows, and its Telegram messages, through the move."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from groups.models import Approval

BEFORE = [
    ("garden", "0016_mcp_servers"),
    ("groups", "0006_cost_and_webhooks"),
    ("telegram_approvals", "0001_initial"),
]


def _migrate(targets=None):
    """Migrate the test database to ``targets`` (default: every app's latest) and return the
    models as they were there."""
    executor = MigrationExecutor(connection)
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_an_approval_made_before_the_move_is_read_through_groups_after_it():
    old = _migrate(BEFORE)
    assert ("garden", "approval") in {
        (m._meta.app_label, m._meta.model_name) for m in old.get_models()
    }
    user = old.get_model(settings.AUTH_USER_MODEL).objects.create(username="before-the-move")
    account = old.get_model("garden", "ModelAccount").objects.create(
        owner=user, name="scripted", provider="scripted"
    )
    agent = old.get_model("garden", "Agent").objects.create(
        owner=user, handle="ledger", name="Ledger", model_account=account
    )
    made = old.get_model("garden", "Approval").objects.create(
        owner=user,
        agent=agent,
        tool_call_id="call-1",
        action={"name": "file.write", "arguments": {"path": "a.txt"}},
        status="approved",
        surface="telegram",
    )
    old.get_model("telegram_approvals", "TelegramApprovalMessage").objects.create(
        approval=made, chat_id=7, claimed_at=made.created_at
    )

    after = _migrate()
    assert ("garden", "approval") not in {
        (m._meta.app_label, m._meta.model_name) for m in after.get_models()
    }

    moved = Approval.objects.get(pk=made.pk)
    assert (moved.owner_id, moved.agent_id, moved.tool_call_id, moved.status) == (
        user.pk,
        agent.pk,
        "call-1",
        "approved",
    )
    assert moved.arguments_to_run == {"path": "a.txt"}
    assert moved.telegram_message.chat_id == 7
    assert Approval._meta.db_table == "garden_approval"
