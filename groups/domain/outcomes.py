"""What one step of a request did: the value ``groups.loop.step.advance_request`` returns (and the
task logs). A ``StrEnum``, so each reads as its name."""

from __future__ import annotations

from enum import StrEnum


class StepOutcome(StrEnum):
    # Nothing was done.
    MISSING = "missing"  # no such request (or group)
    STALE = "stale"  # a duplicate or late delivery: the fence moved on
    WAITING = "waiting"  # every call slot of the owner is taken: back later, nothing written
    WAITING_FOR_TOKEN_BUDGET = "waiting_for_token_budget"  # this minute's budget is spent
    WAITING_FOR_TOOLS = "waiting_for_tools"  # the reply is recorded; its tools wait for a slot
    RETRY = "retry"  # the call failed retryably: the same fence is tried again
    STOPPED = "stopped"  # Stop ended the request while the call streamed: the call is dropped
    # The step went on with the request.
    ASKED = "asked"  # the coordinator asked members
    HELPED = "helped"  # a member asked for help (or its tools were answered by the loop)
    CONTRIBUTED = "contributed"  # a member's contribution answered the ask
    SKIPPED = "skipped"  # a member's contribution did not come; the coordinator goes on
    TOOLS = "tools"  # the reply's tools ran and their results are recorded
    AWAITING_APPROVAL = "awaiting_approval"  # a tool call waits for a person
    SYNTHESIZING = "synthesizing"  # work ended; the reserved synthesis call is next
    # The request ended.
    COMPLETED = "completed"
    FAILED = "failed"
    ROOM_TOO_LARGE = "room_too_large"
    SYNTHESIS_SPENT = "synthesis_spent"
    SYNTHESIS_FAILED = "synthesis_failed"
    TOKEN_BUDGET_SPENT = "token_budget_spent"
    AGENT_CANNOT_RUN = "agent_cannot_run"
