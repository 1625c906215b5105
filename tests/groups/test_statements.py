"""The group loop's critical writes (groups/statements.py): each statement's ORM reference and
its PostgreSQL fast path, run against the same starting rows, write the same rows (every
concrete field, so a field added to a model is checked too) and refuse the same cases. On
SQLite only the reference runs, against the same expected rows: the embedded default's path
is checked in its own right."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from garden.models import Conversation, Message
from garden.pricing import PricedCall
from garden.services.conversations import messages_append
from garden.statements import RowUpdate
from groups import budget, lock_order, statements
from groups.models import SYNTHESIS_CALLS, WORKING_CALLS, CallReservation, Group, GroupRequest
from tests.support.rows import fields_of, row

pytestmark = pytest.mark.django_db


def a_request(group_factory, **changes: Any) -> GroupRequest:
    """A request of a group of its own (one active request per group), its row set to
    ``changes``."""
    group = group_factory(concierge_rules=[], members={"ledger": []})
    # Its thread holds the owner's turn (seq 1).
    thread = Conversation.objects.create(owner=group.owner, group=group, last_seq=1)
    request = GroupRequest.objects.create(group=group, conversation=thread)
    if changes:
        GroupRequest.objects.filter(pk=request.pk).update(**changes)
    request.refresh_from_db()
    return request


def test_each_statement_dispatches_to_the_fast_path_on_postgresql_only(monkeypatch):
    taken = []
    for name in ("claim_fence", "reserve", "consume_and_count", "record_step"):
        for form in ("orm", "pg"):
            monkeypatch.setattr(
                statements, f"{name}_{form}", lambda *a, _f=form, **k: taken.append(_f)
            )
    statements.claim_fence(request_id=1, fence=0, group_id=1)
    statements.reserve(
        request_id=1, purpose="working", agent_id=1, fence=0, attempt=1, at=timezone.now()
    )
    statements.consume_and_count(1, ("fence",), consume=1)
    statements.consume_and_count(1, ("fence",))  # nothing to consume: a locking read
    statements.record_step(a_record(1, 0, messages=[Message()]))
    fast = "pg" if connection.vendor == "postgresql" else "orm"
    assert taken == [fast, fast, fast, "orm", fast]


# -- the claim -------------------------------------------------------------------------------

RECENT, OLD = timedelta(seconds=0), timedelta(days=1)

# (state, fence, completed_fence, waiting_for, touched ago, delivered fence) -> fence claimed
CLAIMS = [
    ("running", 3, 3, "", RECENT, 3, 4),  # the next step
    ("synthesizing", 3, 3, "", RECENT, 3, 4),
    ("running", 4, 3, "", RECENT, 3, 5),  # step 4 was claimed and never completed: again higher
    ("running", 4, 3, GroupRequest.WAITING_FOR_TOOL_SLOT, RECENT, 3, None),  # live: waiting
    ("running", 4, 3, GroupRequest.WAITING_FOR_TOOL_SLOT, OLD, 3, 5),  # its wait was lost
    ("running", 4, 4, "", RECENT, 3, None),  # a duplicate of a completed step
    ("running", 5, 3, "", RECENT, 3, None),  # stale
    ("awaiting_approval", 3, 3, "", RECENT, 3, None),  # not steppable
    ("completed", 3, 3, "", RECENT, 3, None),
]


@pytest.mark.parametrize(
    ("state", "fence", "completed", "waiting", "ago", "delivered", "claimed"), CLAIMS
)
def test_the_claim_moves_the_fence_or_refuses(
    group_factory, path, state, fence, completed, waiting, ago, delivered, claimed
):
    request = a_request(
        group_factory,
        state=state,
        fence=fence,
        completed_fence=completed,
        waiting_for=waiting,
        updated_at=timezone.now() - ago,
    )
    before = row(GroupRequest, request.pk)

    result = getattr(statements, f"claim_fence_{path}")(
        request_id=request.pk, fence=delivered, group_id=request.group_id
    )

    after = row(GroupRequest, request.pk)
    if claimed is None:
        assert result is None and after == before, "refused: nothing written"
        return
    assert after["updated_at"] > before["updated_at"]
    assert after == {**before, "fence": claimed, "updated_at": after["updated_at"]}
    # What it returns is the rows as they are after it, every field.
    assert fields_of(result.request) == after
    assert fields_of(result.group) == row(Group, request.group_id)
    last_seq = Conversation.objects.get(pk=request.conversation_id).last_seq
    assert result.thread_last_seq == last_seq == 1
    assert bool(result.roster_stamp) == (path == "pg")  # the reference reads the roster afresh


def test_the_claim_refuses_a_wrong_group(group_factory, path):
    request = a_request(group_factory, state="running")
    other = a_request(group_factory)
    before = row(GroupRequest, request.pk)
    claim = getattr(statements, f"claim_fence_{path}")
    assert claim(request_id=request.pk, fence=0, group_id=other.group_id) is None
    assert row(GroupRequest, request.pk) == before


def a_reservation(request: GroupRequest, *, fence: int, status: str = "reserved", **more):
    return CallReservation.objects.create(
        request=request,
        owner=request.group.owner,
        purpose=more.pop("purpose", "working"),
        agent_id=request.group.coordinator_id,
        fence=fence,
        status=status,
        **more,
    )


@pytest.mark.parametrize(
    ("fence", "completed", "waiting", "ago", "settled"),
    [
        (4, 3, "", RECENT, True),  # a takeover: step 4 was claimed and never completed
        (4, 3, GroupRequest.WAITING_FOR_TOOL_SLOT, OLD, True),  # its wait for a slot was lost
        (4, 3, GroupRequest.WAITING_FOR_TOOL_SLOT, RECENT, False),  # refused: it waits, live
        (3, 3, "", RECENT, False),  # the next step: nothing of step 3 is lost
    ],
)
def test_a_takeover_settles_the_lost_steps_reservations_in_its_claim(
    group_factory, path, fence, completed, waiting, ago, settled
):
    # The claim alone — what a worker that stopped (or died) right after it has written —
    # settles the call of the step it shuts out: consumed (it may have gone out), still
    # counted, never left reserved at a fence that no step owns any more.
    request = a_request(
        group_factory,
        state="running",
        fence=fence,
        completed_fence=completed,
        working_reserved=3,
        waiting_for=waiting,
        updated_at=timezone.now() - ago,
    )
    lost = a_reservation(request, fence=4)
    done = a_reservation(request, fence=2, status="consumed", finished_at=timezone.now())
    given_back = a_reservation(request, fence=3, status="released", reason="PROVIDER_429")
    before = {r.pk: row(CallReservation, r.pk) for r in (lost, done, given_back)}

    getattr(statements, f"claim_fence_{path}")(
        request_id=request.pk, fence=3, group_id=request.group_id
    )

    after = {pk: row(CallReservation, pk) for pk in before}
    assert after[done.pk] == before[done.pk] and after[given_back.pk] == before[given_back.pk]
    if not settled:
        assert after[lost.pk] == before[lost.pk]
        return
    assert GroupRequest.objects.get(pk=request.pk).fence == 5
    assert after[lost.pk]["finished_at"] is not None
    assert after[lost.pk] == {
        **before[lost.pk],
        "status": "consumed",
        "reason": "ambiguous: step lost",
        "finished_at": after[lost.pk]["finished_at"],
    }
    # Still counted: the lost call is not given back.
    assert GroupRequest.objects.get(pk=request.pk).working_reserved == 3


def test_the_step_claims_through_the_statement(group_factory):
    request = a_request(group_factory, state="running")
    claimed = lock_order.claim_fence(request_id=request.pk, fence=0, group_id=request.group_id)
    assert claimed.request.fence == 1 == GroupRequest.objects.get(pk=request.pk).fence


# -- the reservation -------------------------------------------------------------------------

# (purpose, state, counter already reserved, fence on the row, fence delivered) -> reserved?
RESERVATIONS = [
    ("working", "running", 0, 3, 3, True),
    ("working", "running", WORKING_CALLS - 1, 3, 3, True),  # the last of the twelve
    ("working", "running", WORKING_CALLS, 3, 3, False),  # spent
    ("working", "running", 0, 4, 3, False),  # the fence moved
    ("working", "synthesizing", 0, 3, 3, False),  # not the state that may spend it
    ("synthesis", "synthesizing", 0, 3, None, True),
    ("synthesis", "synthesizing", SYNTHESIS_CALLS, 3, None, False),
    ("maintenance", "completed", 0, 3, None, True),  # any state, apart from the twelve
    ("maintenance", "completed", 1, 3, None, False),
]


@pytest.mark.parametrize(("purpose", "state", "used", "fence", "delivered", "made"), RESERVATIONS)
def test_a_reservation_counts_and_writes_its_audit_row_or_refuses(
    group_factory, path, purpose, state, used, fence, delivered, made
):
    counter = statements.BUDGET_COUNTERS[purpose][0]
    request = a_request(group_factory, state=state, fence=fence, **{counter: used})
    agent_id = request.group.coordinator_id
    before = row(GroupRequest, request.pk)
    at = timezone.now() - timedelta(seconds=5)

    result = getattr(statements, f"reserve_{path}")(
        request_id=request.pk,
        purpose=purpose,
        agent_id=agent_id,
        fence=delivered,
        attempt=2,
        at=at,
    )

    after = row(GroupRequest, request.pk)
    written = list(CallReservation.objects.filter(request=request).values_list("pk", flat=True))
    if not made:
        assert result is None and after == before and written == [], "refused: nothing written"
        return
    expected = {**before, counter: used + 1}
    if delivered is not None:
        expected.update(working_agent_id=agent_id, working_since=at, working_fence=delivered)
    assert after == expected
    assert written == [result.pk]
    audit = row(CallReservation, result.pk)
    assert fields_of(result) == audit, "what it returns is the row written"
    assert audit["created_at"] is not None
    del audit["id"], audit["created_at"]
    assert audit == {
        "request_id": request.pk,
        "owner_id": request.group.owner_id,
        "purpose": purpose,
        "agent_id": agent_id,
        "fence": delivered or 0,
        "attempt": 2,
        "status": "reserved",
        "reason": "",
        "provider": "",
        "model": "",
        "input_tokens": 0,
        "output_tokens": 0,
        "cost": None,
        "finished_at": None,
    }


def test_the_budget_reserves_through_the_statement(group_factory):
    request = a_request(group_factory, state="running")
    made = budget.reserve_call(
        request_id=request.pk, purpose="working", agent_id=request.group.coordinator_id, fence=0
    )
    assert made.pk and GroupRequest.objects.get(pk=request.pk).working_reserved == 1


def test_the_fast_path_names_every_field_of_the_audit_row():
    """A field added to CallReservation must be named in the fast path's INSERT or declared
    left to the database; left out, it has to be one the database can fill."""
    inserted, left = set(statements.RESERVATION_INSERTED), set(statements.RESERVATION_LEFT_OUT)
    assert not inserted & left
    assert {f.name for f in CallReservation._meta.concrete_fields} == inserted | left
    for name in left - {"id"}:
        field = CallReservation._meta.get_field(name)
        assert field.null or field.has_db_default(), name


# -- consume and count -----------------------------------------------------------------------

PRICED = PricedCall("openai", "gpt-4o", 1_000, 100, Decimal("0.003500000"))
UNPRICED = PricedCall("openai", "llama3.1:8b", 50, 5, None)
FREE = PricedCall("scripted", "scripted", 0, 0, Decimal(0))
READ = ("fence", "state", "input_tokens", "output_tokens", "cost", "unpriced_calls")


@pytest.mark.parametrize(
    ("call", "status", "consumed", "counted"),
    [
        (PRICED, "reserved", True, (1_000, 100, Decimal("0.0035"), 0)),
        (UNPRICED, "reserved", True, (50, 5, Decimal(0), 1)),
        (FREE, "reserved", True, (0, 0, Decimal(0), 0)),  # recorded, nothing to count
        (None, "reserved", True, (0, 0, Decimal(0), 0)),  # an ambiguous failure: no reply
        (None, "consumed", False, (0, 0, Decimal(0), 0)),  # already consumed: refused
        (None, "released", False, (0, 0, Decimal(0), 0)),  # given back: refused
    ],
)
def test_consume_and_count_records_the_call_and_reads_the_row_after_it(
    group_factory, path, call, status, consumed, counted
):
    request = a_request(group_factory, state="running", fence=2, working_reserved=1)
    reservation = CallReservation.objects.create(
        request=request,
        owner_id=request.group.owner_id,
        purpose="working",
        agent_id=request.group.coordinator_id,
        fence=2,
        status=status,
        reason="earlier" if status != "reserved" else "",
    )
    before, kept = row(GroupRequest, request.pk), row(CallReservation, reservation.pk)

    with transaction.atomic():
        read = getattr(statements, f"consume_and_count_{path}")(
            request.pk, READ, consume=reservation.pk, call=call
        )

    names = ("input_tokens", "output_tokens", "cost", "unpriced_calls")
    after = row(GroupRequest, request.pk)
    assert after == {**before, **dict(zip(names, counted, strict=True))}
    assert read == (2, "running", *counted)
    audit = row(CallReservation, reservation.pk)
    if not consumed:
        assert audit == kept, "refused: the reservation is left as it was"
        return
    assert audit["finished_at"] is not None
    recorded = call.recorded() if call else {}
    assert audit == {
        **kept,
        "status": "consumed",
        "reason": "",
        "finished_at": audit["finished_at"],
        **recorded,
    }


def test_consume_and_count_reads_nothing_of_a_request_that_is_gone(path):
    with transaction.atomic():
        assert getattr(statements, f"consume_and_count_{path}")(0, READ, consume=0) is None


# -- a step's turns with its request row -----------------------------------------------------


def test_a_steps_turns_and_its_request_row_are_one_statement_on_postgresql(group_factory):
    """The request row is described (garden/statements.py RowUpdate), with what save would
    write (``updated_at`` refreshed), and written with the turns."""
    request = a_request(group_factory, state="running", fence=2)
    before = row(GroupRequest, request.pk)
    request.queue, request.completed_fence = [{"agent": 1, "kind": "mention"}], 2
    turn = Message(speaker_kind="garden", kind=Message.Kind.NOTICE, content=[], request=request)

    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        messages_append(
            conversation_id=request.conversation_id,
            messages=[turn],
            also=RowUpdate.of(request, ["queue", "completed_fence", "updated_at"]),
        )

    writes = [q["sql"].split()[0] for q in queries.captured_queries]
    writes = [w for w in writes if w in ("WITH", "UPDATE", "INSERT")]
    assert writes == (
        ["WITH"] if connection.vendor == "postgresql" else ["UPDATE"] * 2 + ["INSERT"]
    )
    after = row(GroupRequest, request.pk)
    assert after["updated_at"] > before["updated_at"]
    assert after == {
        **before,
        "queue": [{"agent": 1, "kind": "mention"}],
        "completed_fence": 2,
        "updated_at": after["updated_at"],
    }
    assert Message.objects.get(pk=turn.pk).seq == 2


# -- a step's whole write in steady state ----------------------------------------------------

COUNTERS = (
    "working_reserved",
    "synthesis_reserved",
    "maintenance_reserved",
    *("input_tokens", "output_tokens", "cost", "unpriced_calls"),
)


def a_record(request_id: int, fence: int, **given: Any) -> statements.StepRecord:
    """A step record of ``request_id`` at ``fence``: one garden notice, nothing else updated,
    consumed or claimed unless ``given``."""
    given.setdefault(
        "messages",
        [Message(speaker_kind="garden", kind=Message.Kind.NOTICE, content=[])],
    )
    given.setdefault("update", RowUpdate(model=GroupRequest, pk=request_id, values={}))
    return statements.StepRecord(
        request_id=request_id,
        fence=fence,
        **{
            "stored": 0,
            "consume": None,
            "call": None,
            "fields": COUNTERS,
            "claim_next": False,
            **given,
        },
    )


# (state, row's fence, delivered fence, claim the next) -> written
RECORDS = [
    ("running", 2, 2, False, True),
    ("running", 2, 2, True, True),  # the next step's claim made with it
    ("synthesizing", 2, 2, True, True),
    ("running", 3, 2, False, False),  # the fence moved: a stale step
    ("running", 3, 2, True, False),
    ("stopped", 2, 2, False, False),  # no longer steppable
    ("awaiting_approval", 2, 2, True, False),
]


@pytest.mark.parametrize(("state", "fence", "delivered", "claim_next", "written"), RECORDS)
def test_a_steps_record_writes_everything_or_nothing(
    group_factory, path, state, fence, delivered, claim_next, written
):
    request = a_request(group_factory, state=state, fence=fence, working_reserved=1)
    reservation = CallReservation.objects.create(
        request=request,
        owner_id=request.group.owner_id,
        purpose="working",
        agent_id=request.group.coordinator_id,
        fence=delivered,
    )
    before, kept = row(GroupRequest, request.pk), row(CallReservation, reservation.pk)
    thread = row(Conversation, request.conversation_id)
    request.queue, request.completed_fence = [{"agent": 1, "kind": "mention"}], delivered
    turns = [
        Message(
            conversation_id=request.conversation_id,
            speaker_kind="agent",
            speaker_agent_id=request.group.coordinator_id,
            content=[{"type": "text", "text": text}],
            request=request,
            step=delivered,
        )
        for text in ("An answer.", "And an activity line.")
    ]

    recorded = getattr(statements, f"record_step_{path}")(
        statements.StepRecord(
            request_id=request.pk,
            fence=delivered,
            update=RowUpdate.of(request, ["queue", "completed_fence", "updated_at"]),
            messages=turns,
            stored=40,
            consume=reservation.pk,
            call=PRICED,
            fields=COUNTERS,
            claim_next=claim_next,
        )
    )

    after = row(GroupRequest, request.pk)
    if not written:
        assert recorded is None
        assert after == before and row(CallReservation, reservation.pk) == kept
        assert row(Conversation, request.conversation_id) == thread
        assert not Message.objects.filter(request=request).exists(), "refused: nothing written"
        return
    counted = dict(zip(COUNTERS[3:], (1_000, 100, Decimal("0.0035"), 0), strict=True))
    assert after == {
        **before,
        **counted,
        "queue": [{"agent": 1, "kind": "mention"}],
        "completed_fence": delivered,
        "fence": delivered + 1 if claim_next else delivered,
        "updated_at": after["updated_at"],
    }
    assert recorded.values == tuple(after[name] for name in COUNTERS)
    assert row(CallReservation, reservation.pk)["status"] == "consumed"
    assert [(t.seq, t.pk is not None) for t in turns] == [(2, True), (3, True)]
    stored = Message.objects.filter(request=request).order_by("seq")
    assert [m.content[0]["text"] for m in stored] == ["An answer.", "And an activity line."]
    assert row(Conversation, request.conversation_id)["last_seq"] == 3
    assert row(Conversation, request.conversation_id)["stored_bytes"] == thread["stored_bytes"] + 40
    if not claim_next:
        assert recorded.claim is None
        return
    # The claim, as the next step's own claim would have returned it.
    claim = recorded.claim
    assert fields_of(claim.request) == after
    assert fields_of(claim.group) == row(Group, request.group_id)
    assert claim.thread_last_seq == 3
    assert bool(claim.roster_stamp) == (path == "pg")
    if path == "pg":
        made = statements.claim_fence_pg(
            request_id=request.pk, fence=delivered + 1, group_id=request.group_id
        )
        assert made.roster_stamp == claim.roster_stamp, "the same stamp as a claim's"


def test_a_steps_record_is_one_statement_on_postgresql(group_factory):
    request = a_request(group_factory, state="running", fence=2)
    turn = Message(
        conversation_id=request.conversation_id,
        speaker_kind="garden",
        kind=Message.Kind.NOTICE,
        content=[],
        request=request,
    )
    with CaptureQueriesContext(connection) as queries:
        statements.record_step(
            a_record(
                request.pk,
                2,
                update=RowUpdate.of(request, ["updated_at"]),
                messages=[turn],
                claim_next=True,
            )
        )
    sent = [q["sql"].split()[0].upper() for q in queries.captured_queries]
    if connection.vendor == "postgresql":
        assert sent == ["WITH"]
    else:
        assert "INSERT" in sent and sent.count("UPDATE") >= 2


# (state after the step, purpose, its counter before) -> reserved
AHEAD = [
    ("running", "working", 1, True),
    ("running", "working", WORKING_CALLS, False),  # the working budget is spent
    ("synthesizing", "synthesis", 0, True),
    ("synthesizing", "synthesis", SYNTHESIS_CALLS, False),
    ("running", "synthesis", 0, False),  # not the state its purpose is spent in
    ("synthesizing", "working", 1, False),
]


@pytest.mark.parametrize(("state", "purpose", "used", "reserved"), AHEAD)
def test_a_steps_record_reserves_the_next_call_within_its_budget(
    group_factory, path, state, purpose, used, reserved
):
    counter = statements.BUDGET_COUNTERS[purpose][0]
    request = a_request(group_factory, state=state, fence=4, **{counter: used})
    before = row(GroupRequest, request.pk)
    agent_id = request.group.coordinator_id
    at = timezone.now()
    turn = Message(
        conversation_id=request.conversation_id,
        speaker_kind="garden",
        kind=Message.Kind.NOTICE,
        content=[],
        request=request,
    )
    recorded = getattr(statements, f"record_step_{path}")(
        a_record(
            request.pk,
            4,
            update=RowUpdate.of(request, ["updated_at"]),
            messages=[turn],
            claim_next=True,
            reserve_next=statements.NextCall(purpose=purpose, agent_id=agent_id, at=at),
        )
    )
    after = row(GroupRequest, request.pk)
    made = list(CallReservation.objects.filter(request=request))
    assert after["fence"] == 5 and fields_of(recorded.claim.request) == after
    if not reserved:
        assert made == [] and recorded.claim.reservation is None
        assert after[counter] == used
        assert (after["working_agent_id"], after["working_fence"]) == (
            before["working_agent_id"],
            before["working_fence"],
        )
        return
    (reservation,) = made
    assert recorded.claim.reservation.pk == reservation.pk
    assert fields_of(recorded.claim.reservation) == row(CallReservation, reservation.pk)
    assert row(CallReservation, reservation.pk) == {
        **row(CallReservation, reservation.pk),
        "purpose": purpose,
        "fence": 5,
        "attempt": 1,
        "status": "reserved",
        "owner_id": request.group.owner_id,
        "agent_id": agent_id,
    }
    assert row(CallReservation, reservation.pk)["created_at"] >= at
    assert after[counter] == used + 1
    assert (after["working_agent_id"], after["working_since"], after["working_fence"]) == (
        agent_id,
        at,
        5,
    )


def test_only_a_record_that_claims_reserves_ahead():
    with pytest.raises(ValueError, match="claims the next fence"):
        statements.record_step(
            a_record(1, 0, reserve_next=statements.NextCall("working", 1, timezone.now()))
        )
