"""A group request, the unit of work of the loop, and the audit row of every model call it
reserves."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from groups.models.groups import MAINTENANCE_CALLS, SYNTHESIS_CALLS, WORKING_CALLS, Group


class GroupRequest(models.Model):
    """One owner request (or one mission run) against a group.

    The budget counters on this row are the limit: every model call is reserved here with a
    conditional UPDATE before it is dispatched. ``fence`` orders the steps of the request: a
    step claims ``fence + 1`` and every later write of that step is conditional on it.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
        SYNTHESIZING = "synthesizing", "Synthesizing"
        COMPLETED = "completed", "Completed"
        STOPPED = "stopped", "Stopped"
        FAILED = "failed", "Failed"

    ACTIVE_STATES = (State.RUNNING, State.AWAITING_APPROVAL, State.SYNTHESIZING)
    # The states in which a step may run (one model call at a time).
    STEPPABLE_STATES = (State.RUNNING, State.SYNTHESIZING)
    WAITING_FOR_CALL_SLOT = "calls_in_flight"
    # Its reply is recorded and its tools wait for one of the owner's tool slots.
    WAITING_FOR_TOOL_SLOT = "tools_in_flight"
    # This minute's token budget of its owner on an operator credential is spent.
    WAITING_FOR_TOKEN_BUDGET = "token_budget"
    FINISHED_STATES = (State.COMPLETED, State.STOPPED, State.FAILED)

    class Source(models.TextChoices):
        OWNER = "owner", "Owner message"
        MISSION = "mission", "Mission"

    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="requests")
    conversation = models.ForeignKey(
        "garden.Conversation", on_delete=models.CASCADE, related_name="group_requests"
    )
    message = models.ForeignKey(
        "garden.Message", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.OWNER)
    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED)
    working_reserved = models.PositiveSmallIntegerField(default=0)
    synthesis_reserved = models.PositiveSmallIntegerField(default=0)
    maintenance_reserved = models.PositiveSmallIntegerField(default=0)
    fence = models.PositiveIntegerField(default=0)
    # The fence of the last step that finished its writes; a claimed fence above it with no
    # live worker means the step was lost (crash) and may be claimed again.
    completed_fence = models.PositiveIntegerField(default=0)
    queue = models.JSONField(default=list, blank=True)
    # What a running request is waiting for, if anything ("calls_in_flight": every model-call
    # slot of its owner is taken; the step comes back shortly). Shown, never an error.
    waiting_for = models.CharField(max_length=40, blank=True)
    outcome_code = models.CharField(max_length=40, blank=True)
    outcome = models.TextField(blank=True)
    # The member whose model call is out now: set by the reservation of the step at
    # ``working_fence``, current while that step has not completed (``working_now``).
    working_agent = models.ForeignKey(
        "garden.Agent", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    working_since = models.DateTimeField(null=True, blank=True)
    working_fence = models.PositiveIntegerField(default=0)
    # Tokens of the calls whose replies were recorded, as their providers counted them.
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    # What those calls cost, in US dollars, at the price table's prices (garden/pricing.py);
    # a call whose model has no price adds nothing and is counted in ``unpriced_calls``.
    cost = models.DecimalField(max_digits=18, decimal_places=9, default=0, db_default=0)
    unpriced_calls = models.PositiveSmallIntegerField(default=0, db_default=0)
    # The endpoint a script named on the message that opened this request (its events go
    # there too, besides the owner's endpoints for the group).
    webhook = models.ForeignKey(
        "groups.WebhookEndpoint",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    # The W3C traceparent of the request's trace (garden/telemetry.py), set when the message
    # is accepted with tracing on: every step, whichever worker or sweeper sends it, joins it.
    trace_context = models.CharField(max_length=128, blank=True, default="", db_default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["group"],
                condition=Q(state__in=["running", "awaiting_approval", "synthesizing"]),
                name="one_active_request_per_group",
            ),
            models.CheckConstraint(
                condition=Q(working_reserved__lte=WORKING_CALLS), name="working_within_budget"
            ),
            models.CheckConstraint(
                condition=Q(synthesis_reserved__lte=SYNTHESIS_CALLS), name="synthesis_within_budget"
            ),
            models.CheckConstraint(
                condition=Q(maintenance_reserved__lte=MAINTENANCE_CALLS),
                name="maintenance_within_budget",
            ),
        ]
        indexes = [models.Index(fields=["state", "updated_at"], name="request_state_updated")]

    def __str__(self) -> str:
        return f"Request {self.pk} ({self.state})"

    @property
    def is_finished(self) -> bool:
        return self.state in self.FINISHED_STATES

    @property
    def working_now(self) -> bool:
        """Whether ``working_agent``'s call is out now: its step holds the fence, has not
        completed, and the request may still step (a stop or an ending moves the fence)."""
        return (
            self.working_agent_id is not None
            and self.state in self.STEPPABLE_STATES
            and self.working_fence == self.fence
            and self.completed_fence < self.fence
        )


class CallReservation(models.Model):
    """The audit trail of one reserved model call; the request row's counters are the limit."""

    class Purpose(models.TextChoices):
        WORKING = "working", "Working"
        SYNTHESIS = "synthesis", "Synthesis"
        MAINTENANCE = "maintenance", "Maintenance"

    class Status(models.TextChoices):
        RESERVED = "reserved", "Reserved"
        CONSUMED = "consumed", "Consumed"
        RELEASED = "released", "Released"

    # The audit row outlives its request (SET_NULL): clearing a thread or removing a group takes
    # the requests, but what their calls spent stays counted for the owner who spent it.
    request = models.ForeignKey(
        GroupRequest,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="reservations",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
    )
    purpose = models.CharField(max_length=12, choices=Purpose.choices)
    agent = models.ForeignKey("garden.Agent", on_delete=models.PROTECT, related_name="+")
    fence = models.PositiveIntegerField()
    attempt = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RESERVED)
    reason = models.CharField(max_length=60, blank=True)
    # What was called and what it took, recorded when its reply is: the provider and model
    # as they were then (an account may change later), the provider's token counts, and
    # the cost at the price table's prices (null: the model has no price).
    provider = models.CharField(max_length=40, blank=True, default="", db_default="")
    model = models.CharField(max_length=200, blank=True, default="", db_default="")
    input_tokens = models.PositiveIntegerField(default=0, db_default=0)
    output_tokens = models.PositiveIntegerField(default=0, db_default=0)
    cost = models.DecimalField(max_digits=18, decimal_places=9, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["created_at"], name="reservation_created"),
            models.Index(fields=["owner", "created_at"], name="reservation_owner_created"),
        ]

    def __str__(self) -> str:
        return f"{self.purpose} call {self.pk} ({self.status})"
