"""Re-encrypt every stored secret under the first of GARDEN_FERNET_KEYS: owners' pasted
model-account keys, MCP server headers, webhook signing secrets — every field an app registers
with ``garden.credentials.encrypted_field_register``.

Rotation: put a new key first in GARDEN_FERNET_KEYS (keep the old ones after it), deploy, run
this command, then drop the old keys.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from garden.credentials import EncryptedField, api_key_rotate, encrypted_fields
from garden.providers.types import CredentialError


class Command(BaseCommand):
    help = (
        "Re-encrypt stored secrets (model-account keys, MCP headers, webhook secrets) under "
        "the first of GARDEN_FERNET_KEYS."
    )

    def handle(self, *args, **options) -> None:
        done = failed = 0
        for spot in encrypted_fields():
            rotated, unreadable = self._rotate(spot)
            done, failed = done + rotated, failed + unreadable
        self.stdout.write(f"{done} key(s) re-encrypted, {failed} unreadable.")
        if failed:
            raise CommandError(f"{failed} stored key(s) could not be decrypted with any key.")

    def _rotate(self, spot: EncryptedField) -> tuple[int, int]:
        manager, field = spot.model._default_manager, spot.field
        done = failed = 0
        for pk in manager.exclude(**{field: ""}).values_list("pk", flat=True):
            with transaction.atomic():
                rows = manager.select_for_update(no_key=True).filter(pk=pk)
                token = rows.values_list(field, flat=True).first()
                if not token:
                    continue  # deleted, or its secret cleared, since the list was read
                try:
                    fresh = api_key_rotate(token)
                except CredentialError as exc:
                    self.stderr.write(f"{spot.label} {pk}: {exc.code}: {exc}")
                    failed += 1
                    continue
                rows.update(**{field: fresh})
                done += 1
        return done, failed
