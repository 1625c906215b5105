"""The group rule set, pure: every named error, and 'only what a change brings in is checked'."""

from hypothesis import given
from hypothesis import strategies as st

from groups.domain import rules
from groups.domain.rules import Candidate, GroupShape, check_group_change, check_group_create

OWNER = 1
CONCIERGE = Candidate(id=1, owner_id=OWNER, handle="concierge", builtin="concierge")
FATHER = Candidate(id=2, owner_id=OWNER, handle="father", builtin="maker")
LEDGER = Candidate(id=3, owner_id=OWNER, handle="ledger")
ADVISOR = Candidate(id=4, owner_id=OWNER, handle="advisor")
GONE = Candidate(id=5, owner_id=OWNER, handle="gone", removed=True, can_run=False)
IDLE = Candidate(id=6, owner_id=OWNER, handle="idle", can_run=False)  # no model account
THEIRS = Candidate(id=7, owner_id=2, handle="theirs")
AGENTS = {a.id: a for a in (CONCIERGE, FATHER, LEDGER, ADVISOR, GONE, IDLE, THEIRS)}


def create(**kw):
    args = {
        "owner_id": OWNER,
        "name": "Household",
        "members": [LEDGER.id],
        "coordinator": None,
        "agents": AGENTS,
        "default_coordinator": CONCIERGE,
    }
    return check_group_create(**{**args, **kw})


def codes(result):
    return {(e.field, e.code) for e in result.errors}


def test_create_defaults_to_concierge_which_joins_first():
    result = create(name="  Household finances  ")
    assert result.ok
    assert result.shape == GroupShape("Household finances", (CONCIERGE.id, LEDGER.id), CONCIERGE.id)


def test_create_with_an_explicit_coordinator_keeps_the_list_order():
    result = create(members=[ADVISOR.id, LEDGER.id], coordinator=LEDGER.id)
    assert result.shape == GroupShape("Household", (ADVISOR.id, LEDGER.id), LEDGER.id)


def test_name_is_required_and_bounded():
    assert codes(create(name="   ")) == {("name", rules.NAME_REQUIRED)}
    assert codes(create(name=None)) == {("name", rules.NAME_REQUIRED)}
    assert codes(create(name="x" * 101)) == {("name", rules.NAME_TOO_LONG)}
    assert create(name="  " + "x" * 100 + "  ").ok


def test_two_runnable_members_besides_agent_father():
    assert codes(create(members=[])) == {("members", rules.TOO_FEW_MEMBERS)}
    # An agent that cannot run (no model account) may be listed but does not count.
    assert codes(create(members=[IDLE.id])) == {("members", rules.TOO_FEW_MEMBERS)}


def test_unknown_and_foreign_agents_read_the_same():
    unknown, foreign = create(members=[LEDGER.id, 999]), create(members=[LEDGER.id, THEIRS.id])
    assert ("members", rules.MEMBER_NOT_FOUND) in codes(unknown)
    assert ("members", rules.MEMBER_NOT_FOUND) in codes(foreign)
    assert "theirs" not in str(foreign.errors)
    assert codes(create(members=[LEDGER.id, ADVISOR.id], coordinator=THEIRS.id)) == {
        ("coordinator", rules.MEMBER_NOT_FOUND)
    }


def test_removed_maker_duplicate_and_coordinator_errors():
    assert ("members", rules.MEMBER_REMOVED) in codes(create(members=[LEDGER.id, GONE.id]))
    assert ("members", rules.MAKER_NOT_ALLOWED) in codes(create(members=[LEDGER.id, FATHER.id]))
    assert ("coordinator", rules.MAKER_NOT_ALLOWED) in codes(
        create(members=[LEDGER.id, ADVISOR.id], coordinator=FATHER.id)
    )
    assert ("members", rules.DUPLICATE_MEMBER) in codes(create(members=[LEDGER.id, LEDGER.id]))
    assert codes(create(members=[LEDGER.id, ADVISOR.id], coordinator=CONCIERGE.id)) == {
        ("coordinator", rules.COORDINATOR_NOT_MEMBER)
    }
    assert codes(create(members=[LEDGER.id, ADVISOR.id, IDLE.id], coordinator=IDLE.id)) == {
        ("coordinator", rules.COORDINATOR_CANNOT_RUN)
    }
    assert codes(create(default_coordinator=None)) == {
        ("coordinator", rules.COORDINATOR_REQUIRED),
        ("members", rules.TOO_FEW_MEMBERS),
    }
    removed_concierge = Candidate(
        id=1, owner_id=OWNER, handle="concierge", builtin="concierge", removed=True, can_run=False
    )
    assert ("coordinator", rules.MEMBER_REMOVED) in codes(
        create(members=[LEDGER.id, ADVISOR.id], default_coordinator=removed_concierge)
    )


CURRENT = GroupShape("Household", (CONCIERGE.id, LEDGER.id, GONE.id), CONCIERGE.id)


def change(**kw):
    return check_group_change(owner_id=OWNER, current=CURRENT, agents=AGENTS, **kw)


def test_a_removed_member_does_not_block_a_rename():
    result = change(name="Home")
    assert result.ok and result.shape == CURRENT.__class__("Home", CURRENT.members, CONCIERGE.id)


def test_a_removed_member_can_be_taken_out_and_kept_in_a_reorder():
    assert change(members=[CONCIERGE.id, LEDGER.id]).shape.members == (CONCIERGE.id, LEDGER.id)
    assert change(members=[GONE.id, LEDGER.id, CONCIERGE.id]).ok


def test_adding_a_removed_agent_fails():
    assert codes(change(members=[*CURRENT.members, ADVISOR.id, ADVISOR.id, ADVISOR.id])) == {
        ("members", rules.DUPLICATE_MEMBER)
    }
    low = GroupShape("x", (CONCIERGE.id, LEDGER.id), CONCIERGE.id)
    added = check_group_change(
        owner_id=OWNER, current=low, agents=AGENTS, members=[CONCIERGE.id, LEDGER.id, GONE.id]
    )
    assert codes(added) == {("members", rules.MEMBER_REMOVED)}


def test_the_runnable_rule_applies_only_when_a_member_is_brought_in():
    # Ledger leaves: only Concierge can run in the result, and a change that only takes out
    # brings nothing in, so nothing refuses it.
    assert change(members=[CONCIERGE.id, GONE.id]).shape.members == (CONCIERGE.id, GONE.id)
    assert change(members=[CONCIERGE.id]).shape.members == (CONCIERGE.id,)
    # Taking out and bringing in at once checks the result, as creation does.
    assert codes(change(members=[CONCIERGE.id, IDLE.id])) == {("members", rules.TOO_FEW_MEMBERS)}
    weak = GroupShape("x", (CONCIERGE.id, GONE.id), CONCIERGE.id)
    assert check_group_change(owner_id=OWNER, current=weak, agents=AGENTS, name="y").ok
    assert check_group_change(
        owner_id=OWNER, current=weak, agents=AGENTS, members=[GONE.id, CONCIERGE.id]
    ).ok


def test_coordinator_changes_are_checked():
    assert change(coordinator=LEDGER.id).shape.coordinator == LEDGER.id
    assert codes(change(coordinator=ADVISOR.id)) == {("coordinator", rules.COORDINATOR_NOT_MEMBER)}
    assert codes(change(coordinator=GONE.id)) == {("coordinator", rules.MEMBER_REMOVED)}
    assert codes(change(coordinator=THEIRS.id)) == {("coordinator", rules.MEMBER_NOT_FOUND)}
    # Taking the coordinator out without choosing another is refused on the members.
    assert codes(change(members=[LEDGER.id, ADVISOR.id])) == {
        ("members", rules.COORDINATOR_NOT_MEMBER)
    }
    # Both at once: a new coordinator and a membership that holds it.
    result = change(members=[LEDGER.id, ADVISOR.id], coordinator=ADVISOR.id)
    assert result.shape == GroupShape("Household", (LEDGER.id, ADVISOR.id), ADVISOR.id)


def test_foreign_agents_are_never_brought_in_by_a_change():
    assert ("members", rules.MEMBER_NOT_FOUND) in codes(change(members=[*CURRENT.members, 7]))


@given(
    st.lists(st.sampled_from([*sorted(AGENTS), 999]), max_size=8),
    st.one_of(st.none(), st.sampled_from(sorted(AGENTS))),
)
def test_a_created_group_always_satisfies_the_rules(members, coordinator):
    result = create(members=members, coordinator=coordinator)
    if not result.ok:
        assert result.shape is None and all(e.code and e.field and e.message for e in result.errors)
        return
    shape = result.shape
    assert shape.coordinator in shape.members
    assert len(set(shape.members)) == len(shape.members)
    chosen = [AGENTS[i] for i in shape.members]
    assert all(a.owner_id == OWNER and not a.removed and a.builtin != "maker" for a in chosen)
    assert sum(a.can_run for a in chosen) >= 2
    # Listed members keep their order; only a defaulted Concierge is put first.
    assert [m for m in shape.members if m in members] == list(dict.fromkeys(members))


def test_members_that_cannot_run_can_always_be_taken_out():
    # Concierge with two removed members: none but Concierge can run, yet taking one of them
    # out brings nothing in and takes no runnable member out.
    stuck = GroupShape("x", (CONCIERGE.id, GONE.id, IDLE.id), CONCIERGE.id)
    assert check_group_change(
        owner_id=OWNER, current=stuck, agents=AGENTS, members=[CONCIERGE.id, IDLE.id]
    ).ok
    assert check_group_change(
        owner_id=OWNER, current=stuck, agents=AGENTS, members=[CONCIERGE.id]
    ).ok
    # Bringing a member in checks the result, as creation does.
    weak = GroupShape("x", (CONCIERGE.id, GONE.id), CONCIERGE.id)
    assert codes(
        check_group_change(
            owner_id=OWNER, current=weak, agents=AGENTS, members=[CONCIERGE.id, GONE.id, IDLE.id]
        )
    ) == {("members", rules.TOO_FEW_MEMBERS)}
