"""The pure domain of groups loads without Django, a database or an HTTP client: a fresh
interpreter imports every module of ``groups.domain`` and nothing else of the site comes in."""

import pkgutil
import subprocess
import sys
from pathlib import Path

import groups.domain

ALLOWED = {"groups", "groups.domain", "garden", "garden.providers", "garden.providers.types"}


def test_the_domain_imports_nothing_but_itself_and_the_neutral_provider_types():
    names = [f"groups.domain.{m.name}" for m in pkgutil.iter_modules(groups.domain.__path__)]
    assert {"groups.domain.projection", "groups.domain.rules", "groups.domain.bounding"} <= set(
        names
    )
    code = (
        "import importlib, sys\n"
        f"for n in {names!r}: importlib.import_module(n)\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(groups.domain.__file__).parents[2],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    site = {
        m
        for m in loaded
        if m.split(".")[0] in {"garden", "groups", "django", "httpx", "psycopg", "redis", "celery"}
    }
    assert site - set(names) == ALLOWED
