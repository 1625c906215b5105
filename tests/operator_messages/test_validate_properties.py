"""Properties of both validators over arbitrary JSON-like input (hypothesis): they never raise,
and an invalid input always carries one of the named codes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from garden.runtime import RunContext
from operator_messages.validate import (
    CODES,
    REQUEST_FIELDS,
    ValidationResult,
    record_schema,
    validate_operator_message_record,
    validate_operator_message_request,
)
from tests.operator_messages.helpers import NOTE, REPLY, RUN_ID

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=30)
    | st.sampled_from(
        [
            "garden",
            "tend_survey",
            "recently_concluded",
            "canonical",
            "none",
            "reply_copy",
            "out_of_band_note",
            "conversation",
            RUN_ID,
            1,
            5,
            "inbox/testgarden/notes/a.md",
            "inbox/testgarden/a.md",
            "2026-03-29T10:15:00Z",
        ]
    )
)
json_like = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
record_keys = st.sampled_from(sorted(record_schema()["properties"]))
request_keys = st.sampled_from(REQUEST_FIELDS)

CONTEXTS = [
    None,
    RunContext(goal_id=5, run_id=RUN_ID, goal_kind="tend", actor="gardener", origin=None),
    RunContext(goal_id=5, run_id=RUN_ID, goal_kind="durable", actor="gardener", origin=None),
    RunContext(goal_id=5, run_id=RUN_ID, goal_kind="mission", actor="agent:1", origin=None),
]


def assert_named(result: ValidationResult) -> None:
    assert isinstance(result, ValidationResult)
    if result.ok:
        assert result.code is None
    else:
        assert result.code in CODES and result.message


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=json_like)
def test_record_validator_never_raises_on_anything(runtime, data: Any):
    assert_named(validate_operator_message_record(data))


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    base=st.sampled_from([NOTE, REPLY]),
    changes=st.dictionaries(record_keys | st.text(max_size=8), json_like, max_size=3),
    drop=st.sets(record_keys, max_size=2),
)
def test_record_validator_names_the_problem_of_a_near_valid_record(runtime, base, changes, drop):
    record = {k: v for k, v in {**base, **changes}.items() if k not in drop}
    result = validate_operator_message_record(record)
    assert_named(result)
    if not changes and not drop:
        assert result.ok


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=json_like | st.dictionaries(request_keys | st.text(max_size=8), json_like, max_size=6),
    context=st.sampled_from(CONTEXTS),
)
def test_request_validator_never_raises_on_anything(runtime, data: Any, context):
    # No origin in these contexts, so the validator never needs the database.
    assert_named(validate_operator_message_request(data, context=context))


@pytest.mark.django_db
@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    origin=json_like
    | st.fixed_dictionaries({"kind": st.just("conversation"), "conversation_id": json_like}),
    requested=json_like,
)
def test_request_validator_never_raises_on_any_origin(runtime, origin, requested):
    ctx = RunContext(goal_id=5, run_id=RUN_ID, goal_kind="durable", actor="gardener", origin=origin)
    data = {"kind": "recently_concluded", "sender": "garden", "content": "done"}
    assert_named(validate_operator_message_request(data, context=ctx))
    assert_named(validate_operator_message_request({**data, "origin": requested}, context=ctx))
