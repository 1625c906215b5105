"""What agents keep beyond a turn: the artifacts they make, the pages they visit and their
memory notes."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from garden.models.agents import Agent
from garden.models.conversations import Conversation


class Artifact(models.Model):
    """A file an agent made: a document, chart or picture. Its row outlives its conversation."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="artifacts"
    )
    agent = models.ForeignKey(
        Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="artifacts"
    )
    conversation = models.ForeignKey(
        Conversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="artifacts"
    )
    kind = models.CharField(max_length=20, default="document")
    title = models.CharField(max_length=200)
    mime_type = models.CharField(max_length=100, default="text/plain")
    content = models.TextField(blank=True)
    size = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.title


class PageVisit(models.Model):
    """A page an agent fetched (http.fetch), as the Canvas shows it: where, the answer's status
    and title, and a short excerpt of its text — never the page itself. Browsing, not a
    document: it goes with its thread, and an owner keeps only the newest few
    (garden/tools/visits.py)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="page_visits"
    )
    agent = models.ForeignKey(
        Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="page_visits"
    )
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="page_visits"
    )
    url = models.TextField()
    # None when no answer came; ``error`` then names why (FETCH_FAILED, FETCH_TIMEOUT).
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=40, blank=True)
    # The page's <title> when it is an HTML page that has one.
    title = models.CharField(max_length=200, blank=True)
    excerpt = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.title or self.url


class AttachmentData(models.Model):
    """The bytes of a file an owner attached, kept apart from its Artifact so that listing
    artifacts never reads them; in the database, because the workers that pass a picture to a
    model run on other machines than the web process that received it."""

    artifact = models.OneToOneField(
        Artifact, on_delete=models.CASCADE, primary_key=True, related_name="attachment_data"
    )
    data = models.BinaryField()

    def __str__(self) -> str:
        return f"bytes of artifact {self.artifact_id}"


class MemoryNote(models.Model):
    """A durable note or preference in one memory scope.

    Scopes: ``private:<agent id>``, ``shared:<owner id>``, ``group:<group id>``. The scope of a
    write or a recall comes from the trusted run context, never from model-supplied ids.
    """

    class Kind(models.TextChoices):
        NOTE = "note", "Note"
        PREFERENCE = "preference", "Preference"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_notes"
    )
    scope = models.CharField(max_length=60, db_index=True)
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.NOTE)
    text = models.TextField()
    written_by = models.ForeignKey(
        Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.scope} {self.kind}: {self.text[:40]}"
