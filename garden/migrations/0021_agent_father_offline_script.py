"""Agent Father moves off the owner's shared offline account onto one of its own, whose script
makes an agent by name through its platform tool (after approval) and otherwise says what it
understands offline — as a new owner's Agent Father has it (garden.services.maker_script). A
maker its owner put on another account stays there. The script is frozen here as this release
wrote it."""

from django.db import migrations

SHARED_NAME = "Scripted (offline)"
NAME = "Agent Father's script"
SCRIPT = {
    "rules": [
        {
            "after_tool_error": True,
            "reply": "Nothing was changed — it did not go through: {error}",
        },
        {
            "after_tool_result": True,
            "reply": "Done: I made the agent {result.agent.name} (@{result.agent.handle}). It "
            "answers from the offline script until you give it a model on its page.",
        },
        {"after_tool_result": True, "reply": "The tool answered: {result}"},
        {
            "when": "agent called|agent named",
            "capture": {"name": "called|named"},
            "reply": {
                "text": "I'll make the agent {name} (@{name:handle}).",
                "tool_calls": [
                    {
                        "name": "platform.create_agent",
                        "arguments": {
                            "handle": "{name:handle}",
                            "name": "{name}",
                            "instructions": "You are {name}.",
                        },
                    }
                ],
            },
        },
    ],
    "default": "Without a model I understand one request: “make me an agent called <name>” (or "
    "“create an agent named <name>”). I make it on the offline scripted account once you "
    "approve. For anything else — changing or archiving a group, giving an agent tools — move "
    "me to a real model on my page, or use the dashboard's forms.",
}


def forwards(apps, schema_editor):
    Agent = apps.get_model("garden", "Agent")
    ModelAccount = apps.get_model("garden", "ModelAccount")
    makers = Agent.objects.filter(
        builtin="maker", model_account__provider="scripted", model_account__name=SHARED_NAME
    )
    for agent in makers.iterator():
        account = ModelAccount.objects.create(
            owner_id=agent.owner_id,
            name=NAME,
            provider="scripted",
            model="scripted",
            options=SCRIPT,
        )
        Agent.objects.filter(pk=agent.pk).update(model_account=account)


class Migration(migrations.Migration):
    dependencies = [("garden", "0020_message_stopped_at")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
