"""chart.create: an agent puts a chart into the library as data — a kind, labels and named
series of numbers (schema/chart.schema.json) — which the Canvas draws and file.read returns.

A chart is kept as its spec, never as a picture: the Canvas draws it and gives its numbers as
a table, and a member reading it gets the numbers, not pixels.
"""

from __future__ import annotations

import json
import math
from typing import Any

import jsonschema

from garden.providers.types import ToolSpec
from garden.tools import Tool, ToolContext, ToolOutcome, load_schema, register
from garden.tools.files import keep_document

# The Canvas draws an artifact of this type as a chart; file.read reads it as text (JSON).
CHART_MIME = "application/vnd.garden.chart+json"
CHART_SCHEMA = load_schema("chart.schema.json")
# A pie is one series cut into slices; bars and lines compare several.
ONE_SERIES_TYPES = ("pie", "doughnut")
# Stored whole within what the Canvas carries of a document (dashboard CANVAS_TEXT_CHARS);
# the schema's limits keep every valid chart far below it.
MAX_CHART_CHARS = 16_000

_VALIDATOR = jsonschema.validators.validator_for(CHART_SCHEMA)(CHART_SCHEMA)

CHART_CREATE = register(
    Tool(
        spec=ToolSpec(
            name="chart.create",
            description="Make a chart (bar, line, pie or doughnut) from labels and named series "
            "of numbers, one number per label. It is drawn on the Canvas, tagged with you, "
            "with its numbers as a table; members read it with file.read.",
            parameters=CHART_SCHEMA,
        ),
        handler=lambda ctx, args: chart_create(ctx, args),
        meta={"describe": "make the chart {title}", "describe_general": "make a chart"},
        check=lambda args: chart_refusal(args),
    )
)


def chart_problem(spec: dict[str, Any]) -> str | None:
    """What is wrong with ``spec`` as a chart, in words the agent can act on; None when it can
    be drawn. The schema first, then what a schema cannot say: every series has one number
    per label, a pie has one series, and every number is finite."""
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(spec))
    if error is not None:
        path = "/".join(str(p) for p in error.absolute_path) or "chart"
        return f"{path}: {error.message}"
    if not spec["title"].strip():
        return "title: must not be blank"
    labels = len(spec["labels"])
    for n, series in enumerate(spec["series"]):
        if len(series["values"]) != labels:
            return (
                f"series/{n}/values: {series['name']!r} has {len(series['values'])} numbers "
                f"for {labels} labels; give one number per label"
            )
        if not all(math.isfinite(v) for v in series["values"]):
            return f"series/{n}/values: every number must be finite"
    if spec["type"] in ONE_SERIES_TYPES and len(spec["series"]) != 1:
        return f"series: a {spec['type']} chart has exactly one series"
    return None


def chart_content(spec: dict[str, Any]) -> str:
    """The stored spec: the fields the Canvas draws, in a fixed order, as compact JSON."""
    chart = {
        "type": spec["type"],
        "title": spec["title"].strip(),
        "labels": spec["labels"],
        "series": [{"name": s["name"], "values": s["values"]} for s in spec["series"]],
    }
    if spec.get("unit"):
        chart["unit"] = spec["unit"]
    return json.dumps(chart, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _invalid(problem: str) -> ToolOutcome:
    return ToolOutcome(f"INVALID_CHART: {problem}", is_error=True, code="INVALID_CHART")


def chart_refusal(args: dict[str, Any]) -> ToolOutcome | None:
    """INVALID_CHART naming what cannot be drawn or kept, or None."""
    problem = chart_problem(args)
    if problem:
        return _invalid(problem)
    content = chart_content(args)
    if len(content) > MAX_CHART_CHARS:
        return _invalid(f"the chart takes {len(content):,} characters, over {MAX_CHART_CHARS:,}")
    return None


def chart_create(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    refused = chart_refusal(args)
    if refused is not None:
        return refused
    content = chart_content(args)
    artifact = keep_document(
        ctx, kind="chart", title=args["title"], mime_type=CHART_MIME, content=content
    )
    if isinstance(artifact, ToolOutcome):
        return artifact
    return ToolOutcome(
        f"Made chart {artifact.pk} ({args['type']}, {len(args['series'])} series of "
        f"{len(args['labels'])} points): {artifact.title}",
        artifacts=(artifact.pk,),
    )
