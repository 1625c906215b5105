"""Fair share of a shared site: one owner's flood is answered with named 429s and waits behind
its own cap on model calls in flight, while another owner's request is answered — on a real
worker, PostgreSQL and Redis. And each quota is a named refusal with its limit in the message."""

from __future__ import annotations

import pytest

from garden.models import Agent
from garden.services.accounts import scripted_account_for
from garden.services.agents import agent_create
from groups.models import GroupRequest
from tests.conftest import wait_for
from tests.groups.conftest import make_group
from tests.support.api import sign_in
from tests.support.driving import drive


def slow_group(owner, name: str, delay: float):
    group = make_group(
        owner,
        name=name,
        concierge_rules=[],
        concierge_default=f"Done in {name}.",
        members={"ledger": []},
    )
    account = group.coordinator.model_account
    account.options = {**account.options, "delay": delay}
    account.save(update_fields=["options"])
    return group


@pytest.mark.postgres
@pytest.mark.redis
def test_a_flood_is_refused_and_waits_behind_its_own_cap_while_another_owner_is_answered(
    celery_worker_thread, settings, django_user_model
):
    settings.GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER = 1
    settings.GARDEN_MAX_QUEUED_PER_GROUP = 2
    settings.GARDEN_MAX_QUEUED_PER_OWNER = 4
    settings.GARDEN_CALL_SLOT_RETRY_SECONDS = 0.2
    flooder = django_user_model.objects.create_user(username="flooder", password="pw-flood-123")
    other = django_user_model.objects.create_user(username="other", password="pw-other-123")
    floods = [slow_group(flooder, f"Flood {n}", delay=1.0) for n in range(3)]
    quiet = make_group(
        other,
        name="Quiet",
        concierge_rules=[],
        concierge_default="Answered.",
        members={"ledger": []},
    )
    a, b = sign_in(flooder), sign_in(other)

    responses = [
        a.post(f"/api/groups/{g.pk}/messages", {"text": f"task {i}"})
        for i in range(5)
        for g in floods
    ]
    codes = [r.status_code for r in responses]
    assert set(codes) == {202, 429}, codes
    refusals = [r.json() for r in responses if r.status_code == 429]
    assert {body["code"] for body in refusals} == {"QUEUE_FULL"}
    assert any("2 messages waiting" in body["message"] for body in refusals) or any(
        "4 messages waiting" in body["message"] for body in refusals
    ), refusals
    accepted = [r.json()["request"]["id"] for r in responses if r.status_code == 202]

    answer = b.post(f"/api/groups/{quiet.pk}/messages", {"text": "A quick one, please."})
    assert answer.status_code == 202
    theirs = answer.json()["request"]["id"]
    seen_waiting = set()

    def quiet_answered():
        for group in floods:
            active = a.get(f"/api/groups/{group.pk}/messages").json()["active_request"]
            if active and active["waiting_for"]:
                seen_waiting.add(active["waiting_for"])
        return GroupRequest.objects.get(pk=theirs).is_finished

    wait_for(quiet_answered, timeout=60, interval=0.1)
    unfinished = (
        GroupRequest.objects.filter(pk__in=accepted)
        .exclude(state__in=GroupRequest.FINISHED_STATES)
        .count()
    )
    assert GroupRequest.objects.get(pk=theirs).state == "completed"
    # The other owner did not wait for the flood to drain.
    assert unfinished > 0
    # The flood's extra steps waited, visibly, for the owner's own slot.
    assert seen_waiting == {"calls_in_flight"}

    # Nothing the flood had accepted is lost: every request is answered in the end, each with
    # exactly the call it reserved.
    wait_for(
        lambda: (
            not GroupRequest.objects.filter(pk__in=accepted)
            .exclude(state__in=GroupRequest.FINISHED_STATES)
            .exists()
        ),
        timeout=120,
        interval=0.2,
    )
    finished = GroupRequest.objects.filter(pk__in=accepted)
    assert {r.state for r in finished} == {"completed"}
    assert all(r.working_reserved == 1 and r.waiting_for == "" for r in finished)


@pytest.mark.django_db
def test_posting_faster_than_the_message_rate_is_a_429_naming_the_limit(api, owner, settings):
    settings.GARDEN_THROTTLE_RATES = {**settings.GARDEN_THROTTLE_RATES, "messages": "3/min"}
    group = make_group(owner, concierge_rules=[], members={"ledger": []})
    codes = [
        api.post(f"/api/groups/{group.pk}/messages", {"text": f"m{i}"}).status_code
        for i in range(3)
    ]
    assert codes == [202, 202, 202]
    refused = api.post(f"/api/groups/{group.pk}/messages", {"text": "one more"})
    assert refused.status_code == 429
    body = refused.json()
    assert body["code"] == "THROTTLED"
    assert "the limit for posting messages is 3 per minute" in body["message"]
    assert int(refused["Retry-After"]) > 0
    assert GroupRequest.objects.filter(group=group).count() == 3
    # Reading is a scope of its own, still open.
    assert api.get(f"/api/groups/{group.pk}/messages").status_code == 200


@pytest.mark.django_db
def test_each_owner_quota_is_a_named_refusal_with_its_limit(api, owner, settings):
    settings.GARDEN_MAX_GROUPS_PER_OWNER = 1
    settings.GARDEN_MAX_AGENTS_PER_OWNER = 4
    # An owner starts with two accounts: the shared offline one and Agent Father's script.
    settings.GARDEN_MAX_MODEL_ACCOUNTS_PER_OWNER = 3
    settings.GARDEN_MAX_MISSIONS_PER_OWNER = 1
    account = scripted_account_for(owner=owner)
    members = [
        agent_create(owner=owner, handle=h, name=h, model_account=account).pk
        for h in ("ledger", "advisor")
    ]
    refused = api.post("/api/agents", {"handle": "third", "name": "Third"})
    assert (refused.status_code, refused.json()["code"]) == (409, "AGENT_LIMIT")
    assert "4 agents" in refused.json()["message"]
    assert not Agent.objects.filter(owner=owner, handle="third").exists()

    assert api.post("/api/groups", {"name": "One", "members": members}).status_code == 201
    second = api.post("/api/groups", {"name": "Two", "members": members})
    assert (second.status_code, second.json()["code"]) == (409, "GROUP_LIMIT")
    assert "1 groups" in second.json()["message"]

    assert (
        api.post("/api/model-accounts", {"name": "s2", "provider": "scripted"}).status_code == 201
    )
    third = api.post("/api/model-accounts", {"name": "s3", "provider": "scripted"})
    assert (third.status_code, third.json()["code"]) == (409, "ACCOUNT_LIMIT")

    group_id = api.get("/api/groups").json()[0]["id"]
    mission = {
        "name": "Weekly",
        "prompt": "Summarise the week.",
        "target_type": "group",
        "target_id": group_id,
        "schedule": {"every_seconds": 3600},
    }
    assert api.post("/api/missions", mission).status_code == 201, api.post("/api/missions", mission)
    again = api.post("/api/missions", {**mission, "name": "Again"})
    assert (again.status_code, again.json()["code"]) == (409, "MISSION_LIMIT")


@pytest.mark.django_db
def test_a_mission_more_frequent_than_the_minimum_interval_is_refused(api, owner, settings):
    settings.GARDEN_MIN_MISSION_INTERVAL_SECONDS = 600
    group = make_group(owner, concierge_rules=[], members={"ledger": []})
    base = {"name": "Often", "prompt": "Check.", "target_type": "group", "target_id": group.pk}
    for schedule in ({"every_seconds": 300}, {"minute": "*/5"}, {"minute": "0,5", "hour": "9"}):
        refused = api.post("/api/missions", {**base, "schedule": schedule})
        assert refused.status_code == 400, (schedule, refused.content)
        error = refused.json()["errors"][0]
        assert (error["code"], error["field"]) == ("SCHEDULE_TOO_FREQUENT", "schedule")
        assert "every 600 seconds" in error["message"]
    for schedule in ({"every_seconds": 600}, {"minute": "0", "hour": "*/2"}, {"minute": "0,30"}):
        assert api.post("/api/missions", {**base, "schedule": schedule}).status_code == 201, (
            schedule
        )


@pytest.mark.django_db
def test_call_slots_cap_an_owner_and_free_on_release(owner, stranger, settings):
    from garden.slots import slot_acquire, slot_release

    settings.GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER = 2
    first, second = slot_acquire(owner_id=owner.pk), slot_acquire(owner_id=owner.pk)
    assert first and second and slot_acquire(owner_id=owner.pk) is None
    other = slot_acquire(owner_id=stranger.pk)
    assert other is not None
    slot_release(owner_id=owner.pk, token=first)
    third = slot_acquire(owner_id=owner.pk)
    assert third is not None
    for token in (second, third):
        slot_release(owner_id=owner.pk, token=token)
    slot_release(owner_id=stranger.pk, token=other)
    held = [slot_acquire(owner_id=owner.pk), slot_acquire(owner_id=owner.pk)]
    assert all(held) and slot_acquire(owner_id=owner.pk) is None
    for token in held:
        slot_release(owner_id=owner.pk, token=token)


@pytest.mark.django_db
def test_a_reply_runs_at_most_the_tool_cap_and_the_rest_are_answered_not_run(owner, settings):
    from garden.models import Message
    from groups.services.requests import request_create

    settings.GARDEN_MAX_TOOL_CALLS_PER_REPLY = 3
    recall = {"name": "memory.recall", "arguments": {}}
    group = make_group(
        owner,
        concierge_rules=[
            {"after_tool_result": True, "reply": "Done."},
            {"reply": {"tool_calls": [recall] * 5}},
        ],
        members={"ledger": []},
    )
    Agent.objects.filter(pk=group.coordinator_id).update(enabled_tools=["memory.recall"])
    request = request_create(group=group, text="Recall everything, five times.")
    drive(request)
    results = [
        b
        for m in Message.objects.filter(request=request)
        for b in m.content
        if b["type"] == "tool_result"
    ]
    assert len(results) == 5
    assert [b["content"].startswith("NOT_RUN") for b in results] == [False] * 3 + [True] * 2
