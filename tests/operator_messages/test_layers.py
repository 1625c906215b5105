"""operator_messages' import contract names every module of the package, and the record log
reads its pending rows without the rows' module reading back up (no cycle)."""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path

import grimp

import operator_messages

ROOT = Path(__file__).resolve().parents[2]


def _contract() -> dict:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    [contract] = [c for c in contracts if c.get("containers") == ["operator_messages"]]
    return contract


def test_every_module_of_operator_messages_has_a_layer():
    contract = _contract()
    assert contract["type"] == "layers"
    layered = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
    modules = {info.name for info in pkgutil.iter_modules(operator_messages.__path__)}
    assert modules - layered == set()


def test_the_pending_rows_do_not_import_the_record_log_that_flushes_them():
    graph = grimp.build_graph("operator_messages")
    assert (
        graph.find_shortest_chain(
            importer="operator_messages.pending", imported="operator_messages.records"
        )
        is None
    )
    assert graph.find_shortest_chain(
        importer="operator_messages.records", imported="operator_messages.pending"
    ) == ("operator_messages.records", "operator_messages.pending")
