"""Signal receivers: thin hooks that call services."""

from django.conf import settings
from django.db.models.signals import post_save
from django.dispatch import receiver

from .services.agents import agent_builtins_ensure
from .services.workspaces import workspace_personal_ensure


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="garden_personal_workspace")
def _give_new_user_a_personal_workspace(sender, instance, created, raw=False, **kwargs):
    if created and not raw:
        workspace_personal_ensure(user=instance)


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="garden_builtin_agents")
def _give_new_user_builtin_agents(sender, instance, created, raw=False, **kwargs):
    if created and not raw:
        agent_builtins_ensure(owner=instance)
