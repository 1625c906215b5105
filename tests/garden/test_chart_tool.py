"""chart.create: a chart kept as data (schema/chart.schema.json) — one artifact of kind
"chart" under the owner's storage, read back through file.read as its numbers; a spec that
does not add up is refused by name and writes nothing."""

from __future__ import annotations

import json

import pytest

from garden.models import Artifact
from garden.tools import get_tool, run_tool
from garden.tools.charts import CHART_MIME, MAX_CHART_CHARS, chart_create
from tests.garden.test_storage import ctx_for, fill

pytestmark = pytest.mark.django_db

SPEC = {
    "title": "Spending by month",
    "type": "bar",
    "labels": ["Jan", "Feb", "Mar"],
    "series": [
        {"name": "Rent", "values": [800, 800, 820]},
        {"name": "Food", "values": [310.5, 290, 305.25]},
    ],
    "unit": "EUR",
}


def spec(**changes):
    return {**SPEC, **changes}


def test_a_good_spec_writes_one_chart_artifact_tagged_with_the_agent(owner):
    ctx = ctx_for(owner)
    out = run_tool(ctx, "chart.create", SPEC)
    assert not out.is_error, out.content
    chart = Artifact.objects.get()
    assert out.artifacts == (chart.pk,)
    assert (chart.kind, chart.mime_type, chart.title) == ("chart", CHART_MIME, "Spending by month")
    assert (chart.agent_id, chart.conversation_id) == (ctx.agent_id, ctx.conversation_id)
    assert json.loads(chart.content) == {
        "type": "bar",
        "title": "Spending by month",
        "labels": ["Jan", "Feb", "Mar"],
        "series": SPEC["series"],
        "unit": "EUR",
    }
    assert chart.size == len(chart.content.encode())


def test_file_read_returns_the_charts_data_and_file_list_names_it(owner):
    ctx = ctx_for(owner)
    made = run_tool(ctx, "chart.create", SPEC)
    read = run_tool(ctx, "file.read", {"artifact": made.artifacts[0]})
    assert not read.is_error, read.content
    head, body, tail = read.content.split("\n")
    assert "· chart · 'Spending by month'" in head and "by @concierge" in head
    assert json.loads(body)["series"][1] == {"name": "Food", "values": [310.5, 290, 305.25]}
    assert tail == "[end of the document]"
    listed = run_tool(ctx, "file.list", {})
    assert f"artifact {made.artifacts[0]} · chart · 'Spending by month'" in listed.content


BAD = [
    (spec(series=[{"name": "Rent", "values": [1, 2]}]), "has 2 numbers for 3 labels"),
    (spec(type="pie"), "a pie chart has exactly one series"),
    (spec(title="   "), "title: must not be blank"),
    (spec(series=[{"name": "Rent", "values": [1, float("nan"), 3]}]), "must be finite"),
    (spec(series=[{"name": "Rent", "values": [1, float("inf"), 3]}]), "greater than the maximum"),
    (spec(type="radar"), "'radar' is not one of"),
    (spec(labels=[f"m{i}" for i in range(51)]), "labels"),
    (spec(labels=["x" * 81, "b", "c"]), "labels/0"),
    (spec(series=[{"name": f"s{i}", "values": [1, 2, 3]} for i in range(9)]), "series"),
    (spec(series=[{"name": "Rent", "values": [1, 2, 1e16]}]), "series/0/values/2"),
    (spec(series=[{"name": "Rent", "values": [1, "2", 3]}]), "series/0/values/1"),
    (spec(colour="red"), "Additional properties"),
    ({k: v for k, v in SPEC.items() if k != "labels"}, "'labels' is a required property"),
]


@pytest.mark.parametrize(("bad", "says"), BAD)
def test_each_bad_spec_is_refused_by_name_and_writes_nothing(owner, bad, says):
    out = chart_create(ctx_for(owner), bad)
    assert out.is_error and out.code == "INVALID_CHART", out.content
    assert out.content.startswith("INVALID_CHART: ") and says in out.content
    assert not Artifact.objects.exists()


def test_through_the_registry_a_spec_outside_the_schema_is_the_calls_error(owner):
    """The model reads the schema as the tool's parameters: a call that does not fit it is
    refused before the tool runs, like any tool's; one that fits but does not add up is the
    chart's own error."""
    ctx = ctx_for(owner)
    assert get_tool("chart.create").spec.parameters["properties"]["type"]["enum"] == [
        "bar",
        "line",
        "pie",
        "doughnut",
    ]
    assert run_tool(ctx, "chart.create", spec(type="radar")).code == "INVALID_TOOL_ARGUMENTS"
    uneven = spec(series=[{"name": "Rent", "values": [1]}])
    assert run_tool(ctx, "chart.create", uneven).code == "INVALID_CHART"
    assert not Artifact.objects.exists()


def test_the_largest_valid_chart_fits_what_the_canvas_carries(owner):
    labels = ["L" * 78 + f"{i:02}" for i in range(50)]
    values = [-123456789012.125 - i for i in range(50)]
    biggest = spec(
        title="T" * 200,
        labels=labels,
        series=[{"name": "N" * 78 + f"{i:02}", "values": values} for i in range(8)],
        unit="U" * 20,
    )
    out = chart_create(ctx_for(owner), biggest)
    assert not out.is_error, out.content
    assert len(Artifact.objects.get().content) <= MAX_CHART_CHARS


def test_past_the_storage_limit_the_chart_is_refused_and_nothing_is_written(owner, settings):
    settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER = 10_000
    fill(owner, 9_990)
    out = run_tool(ctx_for(owner), "chart.create", SPEC)
    assert out.is_error and out.code == "STORAGE_FULL", out.content
    assert not Artifact.objects.filter(kind="chart").exists()
