"""The owner's own changes to their artifacts: deleting a document they no longer need."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from garden.errors import is_row_id, not_found
from garden.models import Artifact


def artifact_delete(*, owner: AbstractBaseUser, artifact_id: int) -> None:
    """Delete one of the owner's artifacts (a file's bytes go with it) and free its bytes.
    Another owner's, or none, is 404 NOT_FOUND alike. A turn that referred to it keeps its
    one-line reference; file.read then answers ARTIFACT_NOT_FOUND."""
    deleted = 0
    if is_row_id(artifact_id):
        with transaction.atomic():
            deleted, _ = Artifact.objects.filter(pk=artifact_id, owner_id=owner.pk).delete()
    if not deleted:
        raise not_found("document", field="artifact")
