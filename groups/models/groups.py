"""A group: a team of agents in one conversation (or one agent's own room), its members, and the
constants of its budget and room."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

WORKING_CALLS = 11
SYNTHESIS_CALLS = 1
MAINTENANCE_CALLS = 1
# The creation sheet says it in one sentence: group runs share what the room holds.
MEMORY_SENTENCE = "What is in the room is seen by the room."
# Conservative, well under the smallest common model's context (8k tokens ≈ 32k chars),
# since every member turn re-sends the whole room.
DEFAULT_ROOM_CAP_CHARS = 24_000
# The longest message a person may post in a room (the composer counts towards it as they type);
# anything longer goes as an attached document.
MESSAGE_MAX_CHARS = 20_000


class Group(models.Model):
    """A team of agents in one conversation — or, ``kind`` solo, one agent's own room.

    An agent's solo room is how its 1:1 conversations run on the group loop: a team of one
    whose coordinator is the agent, with no members, no group tools and no synthesis of its
    own. It is made on the first message to the agent (``groups.services.solo``), never
    listed as a group, and reached only through its conversations.
    """

    class Kind(models.TextChoices):
        TEAM = "team", "Group"
        SOLO = "solo", "An agent's own room"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_groups"
    )
    # The workspace whose people share the room (its roles say who reads, posts and approves);
    # null only for an agent's own room, which its 1:1 conversations reach. Indexed
    # concurrently by groups 0010, which also gives every existing group its owner's own.
    workspace = models.ForeignKey(
        "garden.Workspace",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        db_index=False,
        related_name="groups",
    )
    name = models.CharField(max_length=100)
    coordinator = models.ForeignKey(
        "garden.Agent", on_delete=models.PROTECT, related_name="coordinated_groups"
    )
    members = models.ManyToManyField(
        "garden.Agent", through="Membership", related_name="agent_groups"
    )
    room_cap_chars = models.PositiveIntegerField(default=DEFAULT_ROOM_CAP_CHARS)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.TEAM)
    deleted_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["coordinator"], condition=Q(kind="solo"), name="one_solo_room_per_agent"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_solo(self) -> bool:
        return self.kind == self.Kind.SOLO

    @property
    def memory_scope(self) -> str:
        return f"group:{self.pk}"


class Membership(models.Model):
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="memberships")
    agent = models.ForeignKey("garden.Agent", on_delete=models.PROTECT, related_name="memberships")
    position = models.PositiveIntegerField(default=0)
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["group_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["group", "agent"], name="membership_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.agent} in {self.group}"
