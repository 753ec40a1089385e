"""The worker's start (``sessionops.worker.startup``): what the process imports before its first
request, and that garbage collection resumes. Every worker of the suite (the pod runner's
``python -m sessionops.worker``) starts this way, so the segment tests show that nothing a
segment does needs the packages kept out."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json, sys
before = set(sys.modules)  # the interpreter's own start (site), the same with or without the worker
from sessionops.worker.startup import load_segment
segment = load_segment()
print(json.dumps({"modules": sorted(m for m, v in sys.modules.items() if v is not None and m not in before),
                  "gc_enabled": gc.isenabled(), "frozen": gc.get_freeze_count(), "main": callable(segment.main)}))
"""


@pytest.fixture(scope="module")
def started() -> dict[str, Any]:
    """A fresh interpreter after the worker's imports, as ``python -m sessionops.worker`` has them."""
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_distributions() -> set[str]:
    """What the image installs: ``[project] dependencies`` (no extra) and theirs, by the markers the
    installed distributions declare (read from pyproject.toml: the venv's metadata of sessionops
    may predate a change of it)."""
    roots = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    todo = [r for r in map(Requirement, roots) if r.marker is None or r.marker.evaluate({"extra": ""})]
    seen: set[tuple[str, str]] = set()
    while todo:
        req = todo.pop()
        wanted = {(_key(req.name), extra) for extra in {"", *req.extras}} - seen
        if not wanted:
            continue
        seen |= wanted
        try:
            requires = importlib.metadata.distribution(req.name).requires or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for line in requires:
            dep = Requirement(line)
            if dep.marker is None or any(dep.marker.evaluate({"extra": extra}) for _, extra in wanted):
                todo.append(dep)
    return {"sessionops", *(name for name, _ in seen)}


def test_the_worker_imports_only_what_the_image_installs(started: dict[str, Any]) -> None:
    """Development packages (pytest's, the test cluster's, the plugin's extra) are installed here
    but not in the image: a dependency that imports one merely because it is found would make this
    environment's worker start differ from the pod's."""
    owners = importlib.metadata.packages_distributions()
    allowed = image_distributions()
    tops = {m.split(".")[0] for m in started["modules"]} - set(sys.stdlib_module_names)
    foreign = {top: dists for top in tops if (dists := owners.get(top)) and not {_key(d) for d in dists} & allowed}
    assert not foreign, foreign


def test_optional_packages_stay_out(started: dict[str, Any]) -> None:
    """aiohttp and click are in the image (the operator's, through kopf) but no segment uses them;
    typer and kopf belong to the plugin and the operator."""
    kept_out = {"aiohttp", "click", "rich", "typer", "kopf"}
    tops = {m.split(".")[0] for m in started["modules"]}
    assert not tops & kept_out, sorted(tops & kept_out)
    assert started["main"]


def test_only_the_api_types_a_worker_uses(started: dict[str, Any]) -> None:
    modules = set(started["modules"])
    assert {"sessionops.api.run", "sessionops.api.snapshot"} <= modules
    assert not modules & {"sessionops.api.agent", "sessionops.api.session"}
    assert not [m for m in modules if m.startswith(("sessionops.manager", "sessionops.admission", "sessionops.cli"))]


def test_collection_resumes_with_the_imports_frozen(started: dict[str, Any]) -> None:
    assert started["gc_enabled"]
    assert started["frozen"] > 10_000
