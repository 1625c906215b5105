"""The export's document is described twice, as schema/conversation-export.schema.json and as
the OpenAPI schema's ConversationExportOutput: both export operations are there by name, and
the two descriptions name the same fields at every level."""

from __future__ import annotations

import json
from pathlib import Path

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schema" / "conversation-export.schema.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text())


def _openapi() -> dict:
    from drf_spectacular.generators import SchemaGenerator

    return json.loads(
        json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str)
    )


def test_the_export_operations_are_in_the_openapi_schema_by_name():
    schema = _openapi()
    for path, operation_id in (
        ("/api/groups/{group_id}/export", "export_group_history"),
        ("/api/conversations/{conversation_id}/export", "export_conversation"),
    ):
        operation = schema["paths"][path]["get"]
        assert operation["operationId"] == operation_id
        assert {"200", "400", "404", "413"} <= set(operation["responses"])
        content = operation["responses"]["200"]["content"]
        assert content["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ConversationExportOutput"
        }
        assert content["text/markdown"]["schema"]["type"] == "string"
        [param] = [p for p in operation["parameters"] if p["name"] == "format"]
        assert param["schema"]["enum"] == ["json", "markdown"]


def _file_properties(node: dict) -> dict:
    """The JSON Schema file's properties of ``node``, with references and null-alternatives
    followed to the object they name."""
    if "$ref" in node:
        return _file_properties(SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]])
    for alternative in node.get("oneOf", []):
        if alternative.get("type") == "object" or "$ref" in alternative:
            return _file_properties(alternative)
    if node.get("type") == "array":
        return _file_properties(node["items"])
    return node.get("properties", {})


def _openapi_properties(node: dict, components: dict) -> dict:
    if "$ref" in node:
        return _openapi_properties(components[node["$ref"].rsplit("/", 1)[1]], components)
    for alternative in node.get("allOf", []) + node.get("oneOf", []):
        if "$ref" in alternative:
            return _openapi_properties(alternative, components)
    if node.get("type") == "array":
        return _openapi_properties(node["items"], components)
    return node.get("properties", {})


def test_the_schema_file_and_the_openapi_shape_name_the_same_fields():
    """The JSON Schema file and the OpenAPI serializers are twins: the same fields at every
    level of the document."""
    components = _openapi()["components"]["schemas"]
    pending = [("", SCHEMA, components["ConversationExportOutput"])]
    while pending:
        where, mine, theirs = pending.pop()
        file_fields = _file_properties(mine)
        api_fields = _openapi_properties(theirs, components)
        assert set(file_fields) == set(api_fields), where
        for name, node in file_fields.items():
            if _file_properties(node):
                pending.append((f"{where}.{name}", node, api_fields[name]))
