"""The record schema and both validators, called directly: policy pairs, delivery surfaces,
and the request codes that need no emitter around them."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from garden.runtime import RunContext
from operator_messages.validate import (
    SCHEMA_PATH,
    ValidationResult,
    validate_operator_message_record,
    validate_operator_message_request,
)
from tests.operator_messages.helpers import GARDEN, NOTE, REPLY, RUN_ID

TEND = RunContext(goal_id=5, run_id=RUN_ID, goal_kind="tend", actor="gardener", origin=None)


@pytest.fixture
def schema() -> Draft202012Validator:
    return Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))


def code(record: dict) -> str | None:
    return validate_operator_message_record(record).code


def without(record: dict, *names: str) -> dict:
    return {k: v for k, v in record.items() if k not in names}


def test_schema_file_is_draft_2020_12_and_closed(schema):
    Draft202012Validator.check_schema(schema.schema)
    assert schema.schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema.schema["additionalProperties"] is False
    assert set(schema.schema["required"]) == {
        "schema_version",
        "kind",
        "sender",
        "transcript_policy",
        "delivery_policy",
        "emitted_at",
        "source_goal_id",
        "source_run_id",
    }


@pytest.mark.parametrize(
    "record",
    [
        NOTE,
        REPLY,
        without(REPLY, "delivery_path"),  # a reply copy is only attempted
    ],
    ids=["note", "reply-copy", "reply-copy-not-written"],
)
def test_the_allowed_policy_combinations_pass_both(runtime, schema, record):
    assert schema.is_valid(record)
    assert validate_operator_message_record(record) == ValidationResult(ok=True)


@pytest.mark.parametrize(
    "record",
    [
        {**NOTE, "transcript_policy": "canonical"},
        {
            **NOTE,
            "delivery_policy": "reply_copy",
            "delivery_path": f"inbox/{GARDEN}/20260329T101500Z-tend_survey-1a2b3c4d.md",
        },
        {**REPLY, "delivery_policy": "out_of_band_note"},
        {**REPLY, "transcript_policy": "none"},
        without(REPLY, "origin"),
        without(REPLY, "conversation_message_id"),
        {**NOTE, "origin": REPLY["origin"]},
        {**NOTE, "conversation_message_id": 41},
        without(NOTE, "delivery_path"),
    ],
    ids=[
        "canonical+note",
        "none+reply",
        "reply+note",
        "none+copy",
        "copy-no-origin",
        "copy-no-message",
        "note-with-origin",
        "note-with-message",
        "note-without-file",
    ],
)
def test_a_mismatched_policy_pair_fails_schema_and_validator(runtime, schema, record):
    assert not schema.is_valid(record)
    result = validate_operator_message_record(record)
    assert (result.ok, result.code) == (False, "INVALID_OPERATOR_MESSAGE_POLICY")


@pytest.mark.parametrize(
    ("record", "in_schema"),
    [
        ({**NOTE, "delivery_path": f"inbox/{GARDEN}/x.md"}, False),  # a note on the reply surface
        ({**REPLY, "delivery_path": f"inbox/{GARDEN}/notes/x.md"}, False),  # a copy among notes
        ({**NOTE, "delivery_path": f"inbox/{GARDEN}/notes/deeper/x.md"}, False),
        ({**NOTE, "delivery_path": f"inbox/{GARDEN}/notes/../../../etc/x.md"}, False),
        ({**REPLY, "delivery_path": "../outside.md"}, False),
        ({**REPLY, "delivery_path": f"/tmp/inbox/{GARDEN}/x.md"}, False),
        ({**REPLY, "delivery_path": f"inbox/{GARDEN}/.hidden.md"}, False),
        ({**REPLY, "delivery_path": f"inbox/{GARDEN}/x.txt"}, False),
        # A staged file's temporary name is never a delivery_path: records name the final file.
        ({**REPLY, "delivery_path": f"inbox/{GARDEN}/.x.md.{RUN_ID}.tmp"}, False),
        ({**NOTE, "delivery_path": f"inbox/{GARDEN}/notes/.x.md.{RUN_ID}.tmp"}, False),
        ({**REPLY, "delivery_path": "inbox/another-garden/x.md"}, True),  # the schema knows no name
        ({**REPLY, "delivery_path": f"inbox/{GARDEN}/x.md\n"}, True),
    ],
    ids=[
        "note-on-replies",
        "copy-in-notes",
        "deeper",
        "dotdot",
        "relative-escape",
        "absolute",
        "dotfile",
        "not-markdown",
        "staged-copy",
        "staged-note",
        "other-garden",
        "newline",
    ],
)
def test_a_delivery_path_off_the_surfaces_fails(runtime, schema, record, in_schema):
    assert schema.is_valid(record) is in_schema
    result = validate_operator_message_record(record)
    assert (result.ok, result.code, result.field) == (
        False,
        "INVALID_OPERATOR_MESSAGE_PATH",
        "delivery_path",
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"colour": "red"}, "UNKNOWN_OPERATOR_MESSAGE_FIELD"),
        ({"content": "the note text"}, "UNKNOWN_OPERATOR_MESSAGE_FIELD"),
        ({"kind": "startup_status"}, "INVALID_OPERATOR_MESSAGE_KIND"),
        ({"sender": "gardener"}, "INVALID_OPERATOR_MESSAGE_SENDER"),
        ({"source_goal_id": "5"}, "INVALID_OPERATOR_MESSAGE_CONTEXT"),
        ({"source_goal_id": True}, "INVALID_OPERATOR_MESSAGE_CONTEXT"),
        ({"source_run_id": "../x"}, "INVALID_OPERATOR_MESSAGE_CONTEXT"),
        (
            {"origin": {"kind": "conversation", "conversation_id": 3.0}},
            "INVALID_OPERATOR_MESSAGE_ORIGIN",
        ),
        (
            {"origin": {"kind": "conversation", "conversation_id": 3, "x": 1}},
            "INVALID_OPERATOR_MESSAGE_ORIGIN",
        ),
        ({"conversation_message_id": 0}, "INVALID_OPERATOR_MESSAGE_ORIGIN"),
        ({"transcript_policy": "full"}, "INVALID_OPERATOR_MESSAGE_POLICY"),
        ({"delivery_path": 7}, "INVALID_OPERATOR_MESSAGE_PATH"),
        ({"schema_version": 2}, "INVALID_OPERATOR_MESSAGE_RECORD"),
        ({"emitted_at": "2026-13-45T99:00:00Z"}, "INVALID_OPERATOR_MESSAGE_RECORD"),
    ],
)
def test_record_field_codes(runtime, change, expected):
    assert code({**REPLY, **change}) == expected


def test_a_record_that_is_not_an_object(runtime):
    for value in (None, [], "record", 3):
        assert code(value) == "INVALID_OPERATOR_MESSAGE_RECORD"  # type: ignore[arg-type]


def test_request_validator_without_context():
    result = validate_operator_message_request({"kind": "tend_survey"})
    assert result == ValidationResult(
        ok=False, code="MISSING_RUNTIME_CONTEXT", message=result.message
    )


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"kind": "tend_survey", "sender": "garden", "content": "ok"}, None),
        ([], "INVALID_OPERATOR_MESSAGE_KIND"),
        (
            {"kind": ["tend_survey"], "sender": "garden", "content": "x"},
            "INVALID_OPERATOR_MESSAGE_KIND",
        ),
        ({"kind": "tend_survey", "content": "x"}, "INVALID_OPERATOR_MESSAGE_SENDER"),
        ({"kind": "tend_survey", "sender": "garden", "content": 5}, "EMPTY_CONTENT"),
        (
            {"kind": "tend_survey", "sender": "garden", "content": "x", "source_goal_id": True},
            "INVALID_OPERATOR_MESSAGE_CONTEXT",
        ),
        (
            {"kind": "tend_survey", "sender": "garden", "content": "x", 3: "y"},
            "UNKNOWN_OPERATOR_MESSAGE_FIELD",
        ),
    ],
)
def test_request_validator_shapes(data, expected):
    assert validate_operator_message_request(data, context=TEND).code == expected


def test_a_context_whose_run_id_is_not_a_path_segment_is_refused():
    ctx = RunContext(goal_id=5, run_id="../escape", goal_kind="tend", actor="gardener", origin=None)
    data = {"kind": "tend_survey", "sender": "garden", "content": "x"}
    assert validate_operator_message_request(data, context=ctx).code == (
        "INVALID_OPERATOR_MESSAGE_CONTEXT"
    )
