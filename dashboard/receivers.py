"""What follows a change to a person's account, wherever it is made (the admin, a management
command, a service): a new password revokes their access tokens; deactivation ends what runs
for them. Connected in DashboardConfig.ready()."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import post_save, pre_save

from garden.services.tokens import token_revoke_all

log = logging.getLogger(__name__)


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
    if getattr(instance, "_password", None) is not None:
        revoked = token_revoke_all(owner=instance)
        if revoked:
            log.info("user %s changed their password: %s tokens revoked", instance.pk, revoked)


def connect() -> None:
    user_model = get_user_model()
    pre_save.connect(_remember_was_active, sender=user_model, dispatch_uid="garden-user-was")
    post_save.connect(_after_account_saved, sender=user_model, dispatch_uid="garden-user-saved")
