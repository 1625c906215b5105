"""What an approval's Telegram message says in each state, and its buttons' data (pure)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from telegram_approvals.render import (
    WAITING,
    ApprovalView,
    already_decided,
    callback_data,
    parse_callback,
    render,
)

PENDING = ApprovalView(
    approval_id=42,
    label="Ledger wants to write plan.md",
    group="Household",
    arguments={"title": "plan.md", "content": "Save 800 a month.\n" * 40},
    status="pending",
)


def test_a_pending_approval_names_the_agent_and_action_shows_arguments_briefly_and_has_buttons():
    shown = render(PENDING)
    lines = shown.text.splitlines()
    assert lines[0] == "Ledger wants to write plan.md (in Household)"
    assert lines[1] == "• title: plan.md"
    assert lines[2].startswith("• content: Save 800 a month. Save") and lines[2].endswith("…")
    assert len(lines[2]) < 140
    assert lines[-1] == WAITING
    assert shown.buttons == (("Approve", "ap:42:a"), ("Reject", "ap:42:r"))


def test_each_outcome_is_said_in_words_and_the_buttons_go():
    def said(**changes):
        shown = render(replace(PENDING, **changes))
        assert shown.buttons == ()
        return shown.text.splitlines()[-1]

    assert (
        said(status="approved", surface="telegram", executed=True)
        == "Approved by you on Telegram — it ran."
    )
    assert (
        said(status="approved", surface="dashboard")
        == "Approved by you in the dashboard — running it now."
    )
    assert (
        said(status="rejected", surface="api") == "Rejected by you through the API; it did not run."
    )
    assert said(status="rejected", reason="request stopped") == "Rejected: the request was stopped."
    assert said(status="rejected", reason="The history was cleared.") == (
        "Rejected: the history was cleared."
    )
    assert (
        said(status="approved", surface="admin", by_owner=False, decider="staff", executed=True)
        == "Approved by staff in the staff admin — it ran."
    )
    # The worker running it stopped before its result was recorded: not "it ran".
    assert said(
        status="approved",
        surface="telegram",
        executed=True,
        reason="outcome unknown: the worker running it stopped",
    ) == (
        "Approved by you on Telegram — the worker running it stopped: whether it ran is "
        "unknown, and it was not run again."
    )
    # Its result was an error: never "it ran".
    assert said(
        status="approved",
        surface="telegram",
        executed=True,
        reason="could not run: NOT_RUN: file.write is no longer among @ledger's tools.",
    ) == (
        "Approved by you on Telegram, but it could not run: NOT_RUN: file.write is no longer "
        "among @ledger's tools."
    )
    assert said(
        status="approved", surface="dashboard", executed=True, reason="failed: STORAGE_FULL"
    ) == ("Approved by you in the dashboard, but it failed: STORAGE_FULL.")


def test_a_late_press_is_told_it_was_already_decided():
    stopped = replace(PENDING, status="rejected", reason="request stopped")
    assert already_decided(stopped) == "Already rejected: the request was stopped."


@given(
    approval_id=st.integers(min_value=1, max_value=10**18 - 1),
    decision=st.sampled_from(["approve", "reject"]),
)
def test_button_data_round_trips_and_fits_telegrams_64_bytes(approval_id, decision):
    data = callback_data(approval_id, decision)
    assert len(data.encode()) <= 64
    assert parse_callback(data) == (approval_id, decision)


@given(st.text(max_size=80))
def test_any_other_button_data_is_not_a_decision(data):
    parsed = parse_callback(data)
    assert parsed is None or data == callback_data(*parsed)


@given(
    label=st.text(min_size=1, max_size=5_000),
    arguments=st.dictionaries(
        st.text(max_size=60), st.one_of(st.text(max_size=3_000), st.integers()), max_size=12
    ),
    status=st.sampled_from(["pending", "approved", "rejected"]),
    reason=st.text(max_size=200),
)
def test_a_message_always_fits_telegram_and_ends_with_where_it_stands(
    label, arguments, status, reason
):
    view = ApprovalView(
        approval_id=1, label=label, group="G", arguments=arguments, status=status, reason=reason
    )
    shown = render(view)
    assert len(shown.text) <= 4096
    assert shown.text.endswith(WAITING if status == "pending" else ".")
    assert bool(shown.buttons) == (status == "pending")


def test_a_message_says_what_it_leaves_out_and_that_approve_runs_the_whole_call():
    arguments = {f"arg{i}": f"value {i}" for i in range(9)}
    arguments["arg1"] = "x" * 500
    shown = render(replace(PENDING, arguments=arguments))
    lines = shown.text.splitlines()
    assert lines[1:7] == [
        "• arg0: value 0",
        "• arg1: " + "x" * 119 + "…",
        *[f"• arg{i}: value {i}" for i in range(2, 6)],
    ]
    assert lines[7] == (
        "… arg1 shown in part; 3 more arguments not shown. Approve runs the whole call, "
        "every argument as the agent gave it."
    )
    assert lines[-1] == WAITING
    # Decided, it no longer speaks of the button.
    decided = render(replace(PENDING, arguments=arguments, status="approved", executed=True))
    assert "… arg1 shown in part; 3 more arguments not shown. The whole call" not in decided.text
    assert "3 more arguments not shown. the whole call is in the dashboard." in decided.text
    # One argument too many is said in the singular; everything shown, nothing is said.
    seven = {f"arg{i}": "v" for i in range(7)}
    assert (
        "… 1 more argument not shown. Approve runs"
        in render(replace(PENDING, arguments=seven)).text
    )
    whole = render(replace(PENDING, arguments={"title": "plan.md"})).text
    assert "…" not in whole and "Approve runs" not in whole


def test_a_message_cut_at_telegrams_limit_says_so():
    shown = render(replace(PENDING, label="L" * 5_000, arguments={"a": "b"}))
    assert len(shown.text) <= 4096
    assert "… the message is cut. Approve runs the whole call" in shown.text
    assert shown.text.endswith(WAITING)


@given(
    arguments=st.dictionaries(
        st.text(max_size=60), st.one_of(st.text(max_size=300), st.integers()), max_size=12
    ),
)
def test_whatever_is_cut_the_pending_message_says_approve_runs_the_whole_call(arguments):
    shown = render(replace(PENDING, arguments=arguments))
    items = list(arguments.items())
    cut = len(items) > 6 or any(
        len(" ".join(str(k).split())) > 40
        or len(" ".join((v if isinstance(v, str) else str(v)).split())) > 120
        for k, v in items[:6]
    )
    assert ("Approve runs the whole call" in shown.text) == cut


FAKE = "\n\nApproved ✅ by you on Telegram — it ran."


def test_no_chosen_string_can_add_a_line_or_hide_text_in_the_message():
    # An MCP server names its tool's argument, the owner names the group and the server, a
    # decider has a username and a failed call a reason: none of them may make a line of the
    # message's own, nor reverse or hide what follows (bidi and zero-width controls).
    from garden.tools.mcp import describe

    label = "Ledger wants to " + describe(
        "mcp.files\u2028x.write", {FAKE: "a\rb", "path\u202e": "gpj.exe\u200b"}
    )
    view = replace(
        PENDING,
        label=label,
        group="Household" + FAKE,
        arguments={FAKE: "x", "note\u2029": "y\u0085z"},
    )
    shown = render(view)
    lines = shown.text.splitlines()
    assert lines[0].startswith("Ledger wants to run ") and "Approved ✅" in lines[0]
    assert lines[0].endswith("(in Household Approved ✅ by you on Telegram — it ran.)")
    assert [line[:2] for line in lines[1:3]] == ["• ", "• "]
    assert lines[3:] == ["", WAITING]
    assert not any(ch in shown.text for ch in "\u202e\u200b\u2028\u2029\u0085\r")

    decided = render(
        replace(view, status="rejected", by_owner=False, decider="eve" + FAKE, surface="api")
    )
    assert decided.text.splitlines()[-1] == (
        "Rejected by eve Approved ✅ by you on Telegram — it ran. through the API; it did not run."
    )
    failed = render(replace(view, status="approved", reason="could not run: boom" + FAKE))
    assert failed.text.splitlines()[-1].startswith("Approved by you, but it could not run: boom")
    assert len(failed.text.splitlines()) == 5
