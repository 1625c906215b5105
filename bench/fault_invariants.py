"""The invariants the fault harness checks, read from the database: safety (reservations,
messages, fences, approvals) over one snapshot, liveness (every request ended honestly within a
bound), and that a step frozen past its lock never wrote after the takeover."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict

from bench.fault_mcp import AGENT_TOOL, ID_ARGUMENT


def safety_violations(
    ids: list[int],
    tags: dict[int, str],
    seen: dict[str, int],
    *,
    mcp_runs: dict[int, int] | None = None,
) -> list[str]:
    """Safety of the requests ``ids``, given the calls the provider has ``seen`` per tag and
    the calls the MCP server received per record id (``mcp_runs``, when one runs), both read
    before this: every dispatch the provider counted was reserved and committed before the
    snapshot, every call the MCP server counted claimed."""
    from django.db import connection, transaction

    # One snapshot of the database: requests run while they are checked, and a counter read
    # before a reservation committed would not match the rows read after.
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("set transaction isolation level repeatable read, read only")
        return _snapshot_violations(ids, tags, seen, mcp_runs)


def _snapshot_violations(
    ids: list[int], tags: dict[int, str], seen: dict[str, int], mcp_runs: dict[int, int] | None
) -> list[str]:
    from garden.models import Message
    from groups.models import (
        MAINTENANCE_CALLS,
        SYNTHESIS_CALLS,
        WORKING_CALLS,
        Approval,
        CallReservation,
        GroupRequest,
    )

    requests = {r.pk: r for r in GroupRequest.objects.filter(pk__in=ids).select_related("group")}
    reservations: dict[int, list[dict]] = defaultdict(list)
    for row in (
        CallReservation.objects.filter(request_id__in=ids)
        .order_by("id")
        .values("request_id", "purpose", "status", "reason", "fence")
    ):
        reservations[row["request_id"]].append(row)
    messages: dict[int, list[dict]] = defaultdict(list)
    for row in (
        Message.objects.filter(request_id__in=ids)
        .order_by("seq")
        .values(
            "id",
            "request_id",
            "speaker_kind",
            "speaker_agent_id",
            "kind",
            "step",
            "reply_to_call_id",
            "content",
        )
    ):
        messages[row["request_id"]].append(row)
    pending = set(
        Approval.objects.filter(request_id__in=ids, status=Approval.Status.PENDING).values_list(
            "request_id", flat=True
        )
    )
    out = []
    for pk in ids:
        r, rows, msgs = requests[pk], reservations[pk], messages[pk]
        held = [x for x in rows if x["status"] != CallReservation.Status.RELEASED]
        for purpose, limit, counter in (
            ("working", WORKING_CALLS, r.working_reserved),
            ("synthesis", SYNTHESIS_CALLS, r.synthesis_reserved),
            ("maintenance", MAINTENANCE_CALLS, r.maintenance_reserved),
        ):
            n = sum(1 for x in held if x["purpose"] == purpose)
            if n > limit:
                out.append(f"request {pk}: {n} {purpose} reservations held, limit {limit}")
            if n != counter:
                out.append(f"request {pk}: {purpose} counter {counter} but {n} reservations held")
        rejected = sum(
            1
            for x in rows
            # Released: a rejection the provider confirmed (any of its named kinds).
            if x["status"] == CallReservation.Status.RELEASED
            and x["reason"].startswith("PROVIDER_")
        )
        dispatched = seen.get(tags[pk], 0)
        if dispatched > len(held) + rejected:
            out.append(
                f"request {pk}: the provider received {dispatched} calls, only "
                f"{len(held)} reservations held + {rejected} released on rejection"
            )
        owner = [m for m in msgs if m["speaker_kind"] == Message.SpeakerKind.OWNER]
        if len(owner) != 1 or r.message_id != owner[0]["id"]:
            out.append(
                f"request {pk}: {len(owner)} owner messages (request.message={r.message_id})"
            )
        # One reply per agent and step; the turn of its tools' results comes beside it.
        turns = Counter(
            (m["speaker_agent_id"], m["step"])
            for m in msgs
            if m["kind"] == Message.Kind.TURN
            and m["step"] is not None
            and any(b.get("type") != "tool_result" for b in m["content"])
        )
        out += [
            f"request {pk}: agent {a} has {n} turns at step {s}"
            for (a, s), n in turns.items()
            if n > 1
        ]
        results = Counter(
            (m["speaker_agent_id"], b.get("call_id"))
            for m in msgs
            if m["kind"] == Message.Kind.TURN
            for b in m["content"]
            if b.get("type") == "tool_result"
        )
        out += [
            f"request {pk}: call {c} of agent {a} has {n} results"
            for (a, c), n in results.items()
            if n > 1
        ]
        answers = Counter(
            m["reply_to_call_id"]
            for m in msgs
            if m["kind"] == Message.Kind.TURN
            and m["reply_to_call_id"]
            and m["speaker_agent_id"] != r.group.coordinator_id
        )
        out += [f"request {pk}: ask {c} answered {n} times" for c, n in answers.items() if n > 1]
        fences = [x["fence"] for x in rows if x["purpose"] != CallReservation.Purpose.MAINTENANCE]
        if any(b <= a for a, b in itertools.pairwise(fences)):
            out.append(f"request {pk}: reservation fences not strictly increasing: {fences}")
        steps = [m["step"] for m in msgs if m["step"] is not None]
        if any(b < a for a, b in itertools.pairwise(steps)):
            out.append(f"request {pk}: message steps go back in seq order: {steps}")
        if r.is_finished and pk in pending:
            out.append(f"request {pk}: {r.state} with an approval still pending")
        # One conclusion: the coordinator's answer (a turn of text alone: no tool call, no
        # tool result) comes at most once.
        concluded = [
            m["step"]
            for m in msgs
            if m["kind"] == Message.Kind.TURN
            and m["speaker_agent_id"] == r.group.coordinator_id
            and m["content"]
            and all(b.get("type") == "text" for b in m["content"])
        ]
        if len(concluded) > 1:
            out.append(f"request {pk}: concluded {len(concluded)} times, at steps {concluded}")
    out += _approval_violations(ids, mcp_runs)
    return out


def mcp_record(action: dict, approved_arguments: dict | None) -> int | None:
    """The record id of an approved call of the harness's MCP tool (what ran: the approved
    arguments if the owner changed them), or None for any other action."""
    if action.get("name") != AGENT_TOOL:
        return None
    return (approved_arguments or action.get("arguments") or {}).get(ID_ARGUMENT)


def _approval_violations(ids: list[int], mcp_runs: dict[int, int] | None) -> list[str]:
    """Each approved action ran at most once (a document written by ``file.write`` under the
    title its call gave, counted when the tool ended; an MCP call under the record id its call
    gave, counted by the MCP server), and each approval's result was recorded at most once. An
    MCP call recorded as done reached the server; and the server received no call that no
    approval asked for."""
    from garden.models import Artifact, Message
    from groups.models import Approval

    out = []
    approvals = list(
        Approval.objects.filter(request_id__in=ids).values(
            "pk",
            "request_id",
            "status",
            "action",
            "approved_arguments",
            "tool_call_id",
            "executed_at",
        )
    )
    titles = [a["action"].get("arguments", {}).get("title", "") for a in approvals]
    written = Counter(
        Artifact.objects.filter(title__in=[t for t in titles if t]).values_list("title", flat=True)
    )
    results: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for m in Message.objects.filter(request_id__in=ids, kind=Message.Kind.TURN):
        for block in m.content or []:
            if block.get("type") == "tool_result":
                results[(m.request_id, block.get("call_id"))].append(block)
    for approval, title in zip(approvals, titles, strict=True):
        record = mcp_record(approval["action"], approval["approved_arguments"])
        if record is not None:
            runs = (mcp_runs or {}).get(record, 0)
        else:
            runs = written.get(title, 0) if title else 0
        recorded = results.get((approval["request_id"], approval["tool_call_id"]), [])
        if record is not None and not runs and any(not r.get("is_error") for r in recorded):
            out.append(
                f"approval {approval['pk']}: recorded as done, but the MCP server never "
                f"received record {record}"
            )
        if runs > 1:
            out.append(f"approval {approval['pk']}: its action ran {runs} times")
        if runs and approval["status"] != Approval.Status.APPROVED:
            out.append(f"approval {approval['pk']}: {approval['status']} but its action ran")
        if runs and approval["executed_at"] is None:
            out.append(f"approval {approval['pk']}: its action ran without being claimed")
        if len(recorded) > 1:
            out.append(f"approval {approval['pk']}: its result was recorded {len(recorded)} times")
    if mcp_runs:
        # Every approval of the database, not only those of ``ids``: the server is shared by
        # the scenarios, and each call it counted was claimed (committed) before.
        asked = {
            mcp_record(action, changed)
            for action, changed in Approval.objects.filter(action__name=AGENT_TOOL).values_list(
                "action", "approved_arguments"
            )
        }
        out += [
            f"the MCP server received {n} calls for record {record}, which no approval asked for"
            for record, n in mcp_runs.items()
            if record not in asked
        ]
    return out


def unknown_outcome_violations(ids: list[int], *, killed: int) -> list[str]:
    """Approved actions whose worker died after claiming them (``killed`` workers did, each
    holding one at least) ended honestly: at least ``killed`` approvals of ``ids`` have an
    unknown outcome, each recorded for its agent as unknown and told in an activity line."""
    from garden.models import Message
    from groups.models import Approval
    from groups.services.approvals import OUTCOME_UNKNOWN_REASON, UNKNOWN_OUTCOME

    unknown = list(
        Approval.objects.filter(request_id__in=ids, reason=OUTCOME_UNKNOWN_REASON).values(
            "pk", "request_id", "tool_call_id"
        )
    )
    out = []
    if len(unknown) < killed:
        out.append(
            f"{killed} workers died holding a claimed action, but only {len(unknown)} "
            "approvals ended with an unknown outcome"
        )
    requests = {a["request_id"] for a in unknown}
    results: dict[tuple[int, str], list[str]] = defaultdict(list)
    lines: Counter = Counter()
    for m in Message.objects.filter(request_id__in=requests):
        for block in m.content or []:
            if m.kind == Message.Kind.TURN and block.get("type") == "tool_result":
                results[(m.request_id, block.get("call_id"))].append(block.get("content"))
            elif m.kind == Message.Kind.ACTIVITY and "unknown" in block.get("text", ""):
                lines[m.request_id] += 1
    for approval in unknown:
        told = results.get((approval["request_id"], approval["tool_call_id"]), [])
        if told != [UNKNOWN_OUTCOME]:
            out.append(f"approval {approval['pk']}: outcome unknown, but its result says {told}")
    needed = Counter(a["request_id"] for a in unknown)
    out += [
        f"request {pk}: {n} outcomes unknown, {lines[pk]} activity lines say so"
        for pk, n in needed.items()
        if lines[pk] < n
    ]
    return out


def liveness_violations(requests: list, bound: float, *, completed: bool = False) -> list[str]:
    """Every request of ``requests`` (rows read after waiting ``bound`` seconds) finished, with
    an outcome code, and an outcome unless it completed. With ``completed`` (faults a request
    must survive: a crash is resumed, never turned into a failure) each one completed, or
    ended SYNTHESIS_FAILED because its one synthesis call was lost with a crashed step."""
    from groups.models import CallReservation, GroupRequest

    # The one honest failure a crash may cause: the synthesis call lost with its step (an
    # ambiguous call keeps its reservation, so the synthesis cannot be made again).
    synthesis_lost = set(
        CallReservation.objects.filter(
            request_id__in=[r.pk for r in requests],
            purpose=CallReservation.Purpose.SYNTHESIS,
            reason__startswith="ambiguous",
        ).values_list("request_id", flat=True)
    )
    out = []
    for r in requests:
        excused = r.outcome_code == "SYNTHESIS_FAILED" and r.pk in synthesis_lost
        if completed and r.is_finished and r.state != GroupRequest.State.COMPLETED and not excused:
            out.append(
                f"request {r.pk}: {r.state} ({r.outcome_code}: {r.outcome}) where a crash "
                "should have been resumed"
            )
        if not r.is_finished:
            out.append(
                f"request {r.pk}: still {r.state} after {bound:g} s (fence {r.fence}, "
                f"completed {r.completed_fence}, working {r.working_reserved})"
            )
        elif not r.outcome_code or (r.state != GroupRequest.State.COMPLETED and not r.outcome):
            out.append(
                f"request {r.pk}: {r.state} without an honest outcome "
                f"({r.outcome_code!r}, {r.outcome!r})"
            )
    return out


def stale_write_violations(subjects: list[tuple[int, int]]) -> list[str]:
    """Each (request, fence) of a step frozen in its model call and taken over since: no message
    at that fence, and its reservation settled as lost by the takeover."""
    from garden.models import Message
    from groups.models import CallReservation

    out = []
    for pk, fence in subjects:
        if Message.objects.filter(request_id=pk, step=fence).exists():
            out.append(f"request {pk}: the stale step at fence {fence} wrote a message")
        row = (
            CallReservation.objects.filter(request_id=pk, fence=fence)
            .values_list("status", "reason")
            .first()
        )
        if row is not None and row != ("consumed", "ambiguous: step lost"):
            out.append(f"request {pk}: reservation at stale fence {fence} is {row}")
    return out
