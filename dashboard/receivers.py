"""What follows a change to a person's account, wherever it is made (the admin, a management
command, a service): a new password revokes their access tokens and closes their room
sockets; deactivation stops their groups' requests, disables their missions and closes their
sockets; signing out closes that session's sockets; leaving a workspace has their sockets checked
again. Connected in DashboardConfig.ready()."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save

from dashboard.sockets import close_session_sockets, close_user_sockets, recheck_user_sockets
from garden.models import WorkspaceMember
from garden.services.tokens import token_revoke_all
from groups.models import Group, GroupRequest
from groups.services.requests import request_stop_active
from missions.services.missions import missions_disable_for_owner

log = logging.getLogger(__name__)

DEACTIVATED = "Stopped: the owner's account was deactivated."


def _remember_was_active(sender: Any, instance: Any, update_fields=None, **kwargs: Any) -> None:
    """Read the stored is_active before a save that may change it (saves of other fields,
    such as last_login at each sign-in, read nothing)."""
    if instance.pk is None or (update_fields is not None and "is_active" not in update_fields):
        instance._garden_was_active = None
        return
    instance._garden_was_active = (
        sender.objects.filter(pk=instance.pk).values_list("is_active", flat=True).first()
    )


def _after_account_saved(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    if created:
        return
    # set_password() leaves the new password here until the save is done; a hash upgrade at
    # sign-in clears it first, so an upgrade is not a change.
    password_changed = getattr(instance, "_password", None) is not None
    deactivated = getattr(instance, "_garden_was_active", None) is True and not instance.is_active
    if password_changed:
        revoked = token_revoke_all(owner=instance)
        if revoked:
            log.info("user %s changed their password: %s tokens revoked", instance.pk, revoked)
    if deactivated:
        # After commit, each in its own transaction: the save holds the user's row, and a
        # post locks its group before the owner's quota row.
        user_id = instance.pk
        transaction.on_commit(lambda: user_deactivated(user_id=user_id))
    elif password_changed:
        user_id = instance.pk
        transaction.on_commit(lambda: close_user_sockets(user_id=user_id))


def user_deactivated(*, user_id: int) -> None:
    """End what runs for a deactivated user: every active or queued request of their groups
    is stopped, their missions are disabled, and their room sockets are closed."""
    groups = Group.objects.filter(
        owner_id=user_id,
        requests__state__in=[*GroupRequest.ACTIVE_STATES, GroupRequest.State.QUEUED],
    ).distinct()
    for group in groups:
        try:
            request_stop_active(group=group, reason=DEACTIVATED, include_queued=True)
        except Exception:  # one group's failure must not keep the others running
            log.exception("group %s of deactivated user %s not stopped", group.pk, user_id)
    missions_disable_for_owner(owner_id=user_id)
    close_user_sockets(user_id=user_id)


def _left_workspace(sender: Any, instance: WorkspaceMember, **kwargs: Any) -> None:
    """A person left a workspace or was removed from it: their open sockets are checked
    again once that is committed, so its rooms stop reaching them within a second."""
    user_id = instance.user_id
    transaction.on_commit(lambda: recheck_user_sockets(user_id=user_id))


def _signed_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    if session_key:
        transaction.on_commit(lambda: close_session_sockets(session_key=session_key))


def connect() -> None:
    user_model = get_user_model()
    pre_save.connect(_remember_was_active, sender=user_model, dispatch_uid="garden-user-was")
    post_save.connect(_after_account_saved, sender=user_model, dispatch_uid="garden-user-saved")
    user_logged_out.connect(_signed_out, dispatch_uid="garden-signed-out")
    post_delete.connect(
        _left_workspace, sender=WorkspaceMember, dispatch_uid="garden-left-workspace"
    )
