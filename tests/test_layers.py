"""Every module of every app sits in an import contract: each app's direct children are named
in a layer of that app's contract (a subpackage counts as one), so a module added beside the
others cannot escape the layers unnoticed. ``make lint`` (lint-imports) checks the arrows;
this checks that nothing is left out of them."""

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
APPS = CONFIG["root_packages"]
NOT_CODE = {"migrations", "templates", "static", "__pycache__"}


def children(package: str) -> set[str]:
    """The modules and subpackages directly inside ``package``, without ``__init__``."""
    path = ROOT.joinpath(*package.split("."))
    names = {p.stem for p in path.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in path.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    return names - NOT_CODE


def layered(container: str) -> set[str]:
    """The names the layers of ``container``'s contracts mention."""
    named: set[str] = set()
    for contract in CONFIG["contracts"]:
        if contract.get("type") != "layers" or container not in contract.get("containers", []):
            continue
        for layer in contract["layers"]:
            named |= {part.strip().strip("()") for part in layer.split("|")}
    return named


@pytest.mark.parametrize("app", APPS)
def test_every_module_of_an_app_is_in_its_layers(app):
    assert children(app), app
    assert children(app) - layered(app) == set()


def test_the_apps_are_layered_together():
    top = next(c for c in CONFIG["contracts"] if "containers" not in c and c["type"] == "layers")
    assert {part.strip() for layer in top["layers"] for part in layer.split("|")} == set(APPS)


def test_a_module_left_out_is_found(tmp_path, monkeypatch):
    """The check itself can fail: a module beside the others, in no layer, is reported."""
    named = layered("groups")
    assert "tasks" in named
    monkeypatch.setitem(
        CONFIG,
        "contracts",
        [c for c in CONFIG["contracts"] if "groups" not in c.get("containers", [])],
    )
    assert "tasks" in children("groups") - layered("groups")
