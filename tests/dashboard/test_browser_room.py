"""The room in a browser, against daphne and a real worker: turns and activity lines arriving
live, @ completion, inline approval, Stop, the ⋯ menu, the Canvas, recovery after a dropped
connection or a gap in seq, and a second user shut out."""

from __future__ import annotations

import re

import pytest
from django.db import transaction
from playwright.sync_api import expect

from dashboard.serving import EmbeddedWorker
from garden import events
from garden.models import Agent, Conversation
from garden.services.conversations import conversation_create, message_append, text_block
from groups.models import Approval, GroupRequest
from tests.conftest import _wait_until_worker_idle
from tests.dashboard.conftest import (
    assert_controls_labelled,
    open_room,
    room_url,
    send,
    tab_until,
    text_of,
)
from tests.dashboard.helpers import (
    SPENDING,
    artifact,
    caught_up,
    household,
    say,
    team_with_scribe,
)
from tests.support.workers import worker_quiescent

pytestmark = [pytest.mark.browser, pytest.mark.timeout(30)]

LEDGER_ACTIVITY = "Concierge asked Ledger: Analyse this month's transactions."


def test_turns_and_activity_lines_arrive_live(open_page, owner, live_worker):
    group = household(owner)
    page = open_room(open_page, owner, group)
    page.evaluate("window.sameDocument = true")
    send(page, SPENDING)

    transcript = page.locator("#transcript")
    expect(transcript.locator(".turn--owner")).to_contain_text(SPENDING)
    activity = transcript.locator(".activity", has_text=LEDGER_ACTIVITY)
    expect(activity).to_be_visible()
    ledger_turn = transcript.locator("> li > .turn--agent", has_text="income 4,200; spending 3,150")
    expect(ledger_turn.locator(".speaker")).to_have_text("Ledger")
    expect(ledger_turn.locator(".face")).to_have_text("L")
    expect(
        transcript.locator("> li > .turn--agent", has_text="Here is where you stand")
    ).to_be_visible()
    expect(page.locator("#budget")).to_contain_text("Completed")
    expect(page.locator("#budget")).to_contain_text("working 4/11")
    expect(page.locator("#budget")).to_contain_text("synthesis 0/1")
    expect(page.locator("#stop")).to_be_hidden()
    assert page.evaluate("window.sameDocument") is True  # no reload

    # The hand-off's call and its result are collapsed under its activity line, one click away.
    call = activity.locator(".exchange-part", has_text="Call: group.ask")
    expect(activity).not_to_have_attribute("open", "")
    expect(call).to_be_hidden()
    activity.locator("summary").first.click()
    expect(call.locator("pre")).to_contain_text('"member": "ledger"')
    expect(activity.locator(".exchange-part", has_text="Result")).to_contain_text(
        "@ledger said: This month"
    )
    # The coordinator's words that only hand off are shown there too, not as a turn.
    expect(activity.locator(".exchange-note")).to_contain_text("I'll ask Ledger for the figures")
    expect(transcript.locator("> li > .turn", has_text="I'll ask Ledger")).to_have_count(0)
    assert_controls_labelled(page)


def test_with_no_worker_the_room_says_so_and_a_worker_that_starts_answers(open_page, owner):
    group = household(owner)
    page = open_room(open_page, owner, group)
    send(page, SPENDING)
    budget = page.locator("#budget")
    no_worker = "No worker is running — messages will be answered when one starts"
    expect(budget).to_contain_text(no_worker)
    expect(page.locator("#live")).to_have_text("No worker running")
    expect(page.locator("#stop")).to_have_text("Cancel")
    page.reload()  # a queued request stays in view: its state, its budget and Cancel
    expect(budget).to_contain_text(no_worker)
    expect(budget).to_contain_text("working 0/11")
    expect(page.locator("#stop")).to_be_visible()
    with EmbeddedWorker(concurrency=2, beat=False, give_up=pytest.fail):
        expect(
            page.locator("#transcript > li > .turn--agent", has_text="Here is where you stand")
        ).to_be_visible()
        expect(budget).to_contain_text("Completed")
        expect(budget).not_to_contain_text(no_worker)
        expect(page.locator("#live")).to_have_text("Live")
        _wait_until_worker_idle()


def test_a_queued_request_is_cancelled_from_the_room(open_page, owner):
    group = household(owner)
    page = open_room(open_page, owner, group)
    send(page, SPENDING)
    expect(page.locator("#stop")).to_have_text("Cancel")
    page.locator("#stop").click()
    expect(page.locator("#budget")).to_contain_text("Stopped")
    expect(page.locator("#stop")).to_be_hidden()
    assert GroupRequest.objects.get(group=group).outcome_code == "CANCELLED"


def test_at_completion_inserts_member_handles(open_page, owner):
    group = household(owner)
    page = open_room(open_page, owner, group)
    composer = page.get_by_label("Message to the group")
    options = page.get_by_role("listbox", name="Members to mention").get_by_role("option")

    composer.click()
    page.keyboard.type("@le")
    expect(options).to_have_count(1)
    expect(options.first).to_contain_text("@ledger")
    expect(composer).to_have_attribute("aria-expanded", "true")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(composer).to_have_value("@ledger ")
    expect(composer).to_have_attribute("aria-expanded", "false")

    page.keyboard.type("and @")
    expect(options).to_have_count(3)
    page.keyboard.press("Tab")
    expect(composer).to_have_value("@ledger and @concierge ")
    expect(composer).to_be_focused()

    page.keyboard.type("with @a")
    page.get_by_role("option", name=re.compile("@advisor")).click()
    expect(composer).to_have_value("@ledger and @concierge with @advisor ")

    page.keyboard.type("@zz")
    expect(options).to_have_count(0)
    page.keyboard.press("Escape")
    assert GroupRequest.objects.count() == 0  # completing never sent anything


def test_approve_inline_and_the_request_finishes(open_page, owner, live_worker):
    group = team_with_scribe(owner)
    page = open_room(open_page, owner, group)
    send(page, "@scribe write the savings summary down")

    card = page.locator(".approval")
    expect(card).to_contain_text("Scribe wants to write Savings plan")
    expect(page.locator("#budget")).to_contain_text("Waiting for your approval")
    assert_controls_labelled(page)
    card.get_by_role("button", name=re.compile("^Approve")).click()

    expect(page.locator(".turn--agent", has_text="Saved the summary.")).to_be_visible()
    expect(page.locator("#budget")).to_contain_text("Completed")
    approval = Approval.objects.get()
    assert approval.status == "approved" and approval.surface == "dashboard"
    # What the approved action made opens on the Canvas, tagged with its agent.
    item = page.locator("#canvas-list .artifact", has_text="Savings plan")
    expect(item).to_have_accessible_name(re.compile("by Scribe$"))
    item.click()
    expect(page.locator("#canvas-view-content")).to_have_text("Save 800 a month by standing order.")


def test_reject_inline(open_page, owner, live_worker):
    group = team_with_scribe(owner)
    page = open_room(open_page, owner, group)
    send(page, "@scribe write the savings summary down")
    page.locator(".approval").get_by_role("button", name=re.compile("^Reject")).click()
    expect(page.locator(".approval")).to_contain_text("Rejected.")
    expect(page.locator("#budget")).not_to_contain_text("Waiting for your approval")
    assert Approval.objects.get().status == "rejected"


def test_stop_ends_the_whole_request(open_page, owner, live_worker):
    group = household(owner, ledger_delay=3.0)
    page = open_room(open_page, owner, group)
    send(page, SPENDING)
    expect(page.locator(".activity", has_text=LEDGER_ACTIVITY)).to_be_visible()
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    expect(page.locator("#budget")).to_contain_text("Working")
    # Ledger's answer is being written: what the page shows of it is kept when Stop cuts it.
    expect(page.locator("#transcript .turn.draft")).to_contain_text("This month")
    stop.click()

    expect(page.locator(".notice")).to_have_text(re.compile(r"^garden\s*Stopped by the owner\.$"))
    expect(page.locator("#budget")).to_contain_text("Stopped")
    expect(stop).to_be_hidden()
    assert GroupRequest.objects.get().state == "stopped"
    stopped = page.locator("#transcript .turn--agent.turn--stopped")
    expect(stopped).to_contain_text("This month")
    # The rest of Ledger's answer is never recorded, and nothing resumes.
    worker_quiescent()
    caught_up(page, GroupRequest.objects.get().conversation, channel=events.group_channel(group.pk))
    expect(
        page.locator("#transcript .turn--agent:not(.turn--stopped)", has_text="This month")
    ).to_have_count(0)
    expect(page.locator("#transcript", has_text="Net 1,050")).to_have_count(0)


def test_the_menu_members_and_rename(open_page, owner):
    group = household(owner)
    page = open_room(open_page, owner, group)
    menu_button = page.get_by_role("button", name="Group menu")
    tab_until(page, "#menu-button")
    page.keyboard.press("Enter")
    items = page.get_by_role("menu").get_by_role("menuitem")
    expect(items).to_have_text(["Members", "Rename…", "Export…", "Clear history…", "Delete group…"])
    expect(items.first).to_be_focused()
    assert_controls_labelled(page)
    page.keyboard.press("Escape")
    expect(page.get_by_role("menu")).to_be_hidden()
    expect(menu_button).to_be_focused()

    # Members lists the members; a member's page is a secondary action on its row.
    menu_button.click()
    items.get_by_text("Members").click()
    dialog = page.get_by_role("dialog", name="Members")
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    rows = dialog.locator("#member-rows li")
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text("coordinator")
    link = dialog.get_by_role("link", name="Open Ledger's page")
    expect(link).to_have_attribute("href", f"/dashboard/agents/{ledger.pk}/")
    assert page.url.endswith(room_url(group))  # the menu never navigated
    assert_controls_labelled(page)
    dialog.get_by_role("button", name="Close").click()

    menu_button.click()
    items.get_by_text("Rename…").click()
    dialog = page.get_by_role("dialog", name="Rename group")
    name = dialog.get_by_label("Name")
    expect(name).to_have_value("Household finances")
    name.fill("   ")
    dialog.get_by_role("button", name="Rename").click()
    expect(dialog.locator("[data-error-for=name]")).to_have_text("A group needs a name.")
    name.fill("Family budget")
    dialog.get_by_role("button", name="Rename").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#group-name")).to_have_text("Family budget")
    expect(page.locator(".breadcrumbs")).to_contain_text("Family budget")
    group.refresh_from_db()
    assert group.name == "Family budget"


def test_change_members_from_the_menu(open_page, owner):
    group = household(owner)
    page = open_room(open_page, owner, group)
    page.get_by_role("button", name="Group menu").click()
    page.get_by_role("menuitem", name="Members").click()
    dialog = page.get_by_role("dialog", name="Members")
    dialog.get_by_text("Change members or coordinator").click()
    dialog.get_by_role("checkbox", name=re.compile("Concierge")).uncheck()
    dialog.get_by_role("button", name="Save members").click()
    expect(dialog.locator("[data-error-for=members]")).to_contain_text(
        "The coordinator stays a member"
    )
    dialog.get_by_label("Coordinator").select_option(label="Ledger (@ledger)")
    dialog.get_by_role("button", name="Save members").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#room-faces [role=img]")).to_have_attribute(
        "aria-label", "Members: Ledger, Finance Advisor"
    )
    group.refresh_from_db()
    assert group.coordinator.handle == "ledger"


def test_clear_history(open_page, owner):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    say(group, text="What did we spend on groceries?")
    say(group, text="520 this month.", speaker=ledger)
    page = open_room(open_page, owner, group)
    expect(page.locator("#transcript .turn")).to_have_count(2)
    expect(page.locator(".turn--agent .speaker")).to_have_text("Ledger")

    page.get_by_role("button", name="Group menu").click()
    page.get_by_role("menuitem", name="Clear history…").click()
    page.get_by_role("dialog", name="Clear history?").get_by_role(
        "button", name="Clear history"
    ).click()
    expect(page.locator("#transcript .turn")).to_have_count(0)
    assert not Conversation.objects.filter(group=group).exists()
    # The room goes on in a fresh thread.
    say(group, text="Starting over.")
    expect(page.locator("#transcript .turn")).to_have_text([re.compile("Starting over.")])


def test_delete_then_undo(open_page, owner):
    group = household(owner)
    page = open_room(open_page, owner, group)
    page.get_by_role("button", name="Group menu").click()
    page.get_by_role("menuitem", name="Delete group…").click()
    page.get_by_role("dialog", name="Delete this group?").get_by_role(
        "button", name="Delete group"
    ).click()

    toast = page.locator("#toast")
    expect(toast).to_contain_text("“Household finances” was deleted.")
    undo = toast.get_by_role("button", name="Undo")
    expect(undo).to_be_focused()
    expect(page.get_by_label("Message to the group")).to_be_disabled()
    group.refresh_from_db()
    assert group.deleted_at is not None

    undo.click()
    expect(toast).to_be_hidden()
    expect(page.get_by_label("Message to the group")).to_be_enabled()
    group.refresh_from_db()
    assert group.deleted_at is None
    assert page.url.endswith(room_url(group))


def test_delete_without_undo_leaves_for_the_roster_after_ten_seconds(open_page, owner):
    group = household(owner)
    page = open_page(owner, room_url(group))
    page.clock.install()
    page.reload()
    page.clock.run_for(1000)
    page.get_by_role("button", name="Group menu").click()
    page.get_by_role("menuitem", name="Delete group…").click()
    page.get_by_role("dialog", name="Delete this group?").get_by_role(
        "button", name="Delete group"
    ).click()
    expect(page.locator("#toast")).to_contain_text("(10)")
    page.clock.run_for(9000)
    expect(page.locator("#toast")).to_contain_text("(1)")
    assert page.url.endswith(room_url(group))
    page.clock.run_for(1500)
    expect(page).to_have_url(re.compile(r"/dashboard/$"))
    expect(page.locator("#group-list")).to_have_count(0)
    expect(page.locator(f'a[href="/dashboard/groups/{group.pk}/"]')).to_have_count(0)


def test_the_canvas_opens_the_groups_artifacts_in_place(open_page, owner):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    artifact(group, agent=ledger, title="March transactions", content="rent 1,400\ngroceries 520")
    page = open_room(open_page, owner, group)
    item = page.get_by_role("complementary", name="Canvas").get_by_role(
        "button", name=re.compile("March transactions")
    )
    expect(item).to_have_accessible_name("March transactions document · by Ledger")
    item.click()
    view = page.locator("#canvas-view")
    expect(view.locator("#canvas-view-title")).to_have_text("March transactions")
    expect(view.locator("#canvas-view-content")).to_have_text("rent 1,400\ngroceries 520")
    expect(view.locator("#canvas-view-meta")).to_have_text("document · by Ledger")
    assert page.url.endswith(room_url(group))
    assert_controls_labelled(page)
    page.get_by_role("button", name="Close the artifact").click()
    expect(view).to_be_hidden()
    expect(item).to_be_focused()
    # Escape closes it too, from the document being read, and focus goes back to its entry.
    item.click()
    view.locator("#canvas-view-content").focus()
    page.keyboard.press("Escape")
    expect(view).to_be_hidden()
    expect(item).to_be_focused()


def test_a_gap_in_seq_or_a_dropped_connection_refetches_the_truth(open_page, owner):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    say(group, text="First.")
    page = open_room(open_page, owner, group)
    turns = page.locator("#transcript .turn")
    expect(turns).to_have_count(1)

    say(group, text="Lost on the way.", speaker=ledger, channel="nowhere")
    # Its event never comes: the page learns of the turn only from the refetch that the gap in
    # seq below sets off (the page's own turns are asserted, in order, after it).
    expect(turns).to_have_count(1)
    say(group, text="Arrived after a gap.", speaker=ledger)
    expect(turns).to_have_text(
        [re.compile("First."), re.compile("Lost on the way."), re.compile("Arrived after a gap.")]
    )

    say(group, text="Sent while the page was away.", speaker=ledger, channel="nowhere")
    page.evaluate("window.gardenRoom.socket.close()")
    expect(page.locator("#live")).to_have_text("Live")
    expect(turns).to_have_count(4)
    expect(turns.last).to_contain_text("Sent while the page was away.")
    assert text_of(page, "#transcript").count("Lost on the way.") == 1


def test_a_rolled_over_thread_starts_from_its_summary(open_page, owner):
    group = household(owner)
    concierge = Agent.objects.get(owner=owner, handle="concierge")
    say(group, text="Plan the month.")
    page = open_room(open_page, owner, group)
    expect(page.locator("#transcript .turn")).to_have_count(1)

    with transaction.atomic():
        old = Conversation.objects.get(group=group)
        Conversation.objects.filter(pk=old.pk).update(status=Conversation.Status.CLOSED)
        new = conversation_create(owner=owner, group=group, carried_summary="We planned March.")
        message_append(
            conversation_id=new.pk,
            speaker_kind="agent",
            speaker_agent=concierge,
            kind="summary",
            content=[text_block("We planned March.")],
            channel=f"group-{group.pk}",
        )
        events.send_event_on_commit(
            channel=f"group-{group.pk}",
            event={"type": "conversation.rolled", "old": old.pk, "conversation": new.pk},
        )
    expect(page.locator("#transcript .summary")).to_contain_text("We planned March.")
    expect(page.locator("#transcript .turn")).to_have_count(0)
    say(group, text="And April?")
    expect(page.locator("#transcript .turn--owner")).to_have_text([re.compile("And April?")])


def test_a_second_user_cannot_open_the_room_or_its_websocket(open_page, owner, stranger):
    group = household(owner)
    page = open_page(stranger, "/dashboard/")
    response = page.goto(room_url(group))
    assert response.status == 404
    code = page.evaluate(
        """(path) => new Promise((resolve) => {
      const socket = new WebSocket(`ws://${location.host}${path}`);
      socket.onclose = (event) => resolve(event.code);
    })""",
        f"/ws/groups/{group.pk}/",
    )
    assert code == 4403
    # The owner's own socket opens.
    expect(open_room(open_page, owner, group).locator("#live")).to_have_text("Live")


def test_a_document_written_again_is_its_next_version_with_the_earlier_one_a_click_away(
    open_page, owner
):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    artifact(group, agent=ledger, title="Savings plan", content="Save 700 a month.")
    artifact(group, agent=ledger, title="Savings plan", content="Save 800 a month.")
    page = open_room(open_page, owner, group)
    canvas = page.get_by_role("complementary", name="Canvas")
    entries = canvas.locator("#canvas-list > .canvas-list > li")
    expect(entries).to_have_count(1)
    latest = entries.first.locator("> button.artifact")
    expect(latest.locator(".artifact-version")).to_have_text("v2")
    latest.click()
    expect(page.locator("#canvas-view-content")).to_have_text("Save 800 a month.")
    expect(page.locator("#canvas-view-meta")).to_contain_text("version 2")
    entries.first.locator("details.versions summary").click()
    older = entries.first.locator("details.versions button.artifact")
    expect(older.locator(".artifact-version")).to_have_text("v1")
    older.click()
    expect(page.locator("#canvas-view-content")).to_have_text("Save 700 a month.")
    assert_controls_labelled(page)
