"""Agent Father gets the maker's new tools (creating an agent, creating a group), and each of
its platform tools needs its owner's approval — as a new owner's Agent Father has them. An
owner who turns an approval off afterwards keeps it off."""

from django.db import migrations

MAKER_TOOLS = [
    "platform.create_agent",
    "platform.create_group",
    "platform.update_group",
    "platform.archive_group",
]


def forwards(apps, schema_editor):
    Agent = apps.get_model("garden", "Agent")
    for agent in Agent.objects.filter(builtin="maker"):
        tools = list(dict.fromkeys([*agent.enabled_tools, *MAKER_TOOLS]))
        approvals = list(dict.fromkeys([*agent.approval_tools, *MAKER_TOOLS]))
        Agent.objects.filter(pk=agent.pk).update(enabled_tools=tools, approval_tools=approvals)


class Migration(migrations.Migration):
    dependencies = [("garden", "0011_token_budgets")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
