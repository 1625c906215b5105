"""Model-account keys: operator credentials and encrypted pasted keys replace ``secret_ref``.

An existing ``env:NAME`` reference becomes ``legacy_secret_ref``. Where one of the operator's
credentials (GARDEN_CREDENTIALS at migration time) reads that same variable for the account's
owner, the account is moved onto that credential; otherwise the reference stays, and works
only while such a credential exists (garden/selectors.py ``account_config``).
"""

from django.db import migrations, models


def adopt_operator_credentials(apps, schema_editor):
    from django.conf import settings

    from garden.credentials import parse_credentials

    ModelAccount = apps.get_model("garden", "ModelAccount")
    configured = parse_credentials(settings.GARDEN_CREDENTIALS)
    for account in ModelAccount.objects.exclude(legacy_secret_ref="").select_related("owner"):
        scheme, _, variable = account.legacy_secret_ref.partition(":")
        for credential in configured.values():
            base_ok = not account.base_url or account.base_url.rstrip("/") == credential.base_url
            granted = credential.users is None or account.owner.username in credential.users
            if (scheme == "env" and credential.env == variable and credential.provider
                    == account.provider and base_ok and granted):
                account.credential = credential.name
                account.legacy_secret_ref = ""
                account.save(update_fields=["credential", "legacy_secret_ref"])
                break


class Migration(migrations.Migration):

    dependencies = [
        ("garden", "0003_memory_approvals_goals_runs"),
    ]

    operations = [
        migrations.RenameField("modelaccount", "secret_ref", "legacy_secret_ref"),
        migrations.AlterField(
            model_name="modelaccount",
            name="legacy_secret_ref",
            field=models.CharField(
                blank=True, editable=False, max_length=200,
                help_text="An env:NAME reference from before operator credentials; it works "
                "only while one of the operator's credentials reads that variable for this owner.",
            ),
        ),
        migrations.AddField(
            model_name="modelaccount",
            name="credential",
            field=models.CharField(blank=True, help_text="One of the operator's named credentials.",
                                   max_length=100),
        ),
        migrations.AddField(
            model_name="modelaccount",
            name="api_key_encrypted",
            field=models.TextField(blank=True, editable=False,
                                   help_text="A key the owner pasted, Fernet-encrypted."),
        ),
        migrations.RunPython(adopt_operator_credentials, migrations.RunPython.noop),
    ]
