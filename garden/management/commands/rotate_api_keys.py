"""Re-encrypt every pasted model-account key under the first of GARDEN_FERNET_KEYS.

Rotation: put a new key first in GARDEN_FERNET_KEYS (keep the old ones after it), deploy, run
this command, then drop the old keys.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from garden.credentials import api_key_rotate
from garden.models import ModelAccount
from garden.providers.types import CredentialError


class Command(BaseCommand):
    help = "Re-encrypt stored model-account keys under the first of GARDEN_FERNET_KEYS."

    def handle(self, *args, **options) -> None:
        done = failed = 0
        for pk in ModelAccount.objects.exclude(api_key_encrypted="").values_list("pk", flat=True):
            with transaction.atomic():
                account = ModelAccount.objects.select_for_update(no_key=True).filter(pk=pk).first()
                if account is None or not account.api_key_encrypted:
                    continue  # deleted, or its key cleared, since the list was read
                try:
                    account.api_key_encrypted = api_key_rotate(account.api_key_encrypted)
                except CredentialError as exc:
                    self.stderr.write(f"account {pk}: {exc.code}: {exc}")
                    failed += 1
                    continue
                account.save(update_fields=["api_key_encrypted"])
                done += 1
        self.stdout.write(f"{done} key(s) re-encrypted, {failed} unreadable.")
        if failed:
            raise CommandError(f"{failed} stored key(s) could not be decrypted with any key.")
