"""The worker's start (``sessionops.worker.startup``): what the process imports before its first
request, and that garbage collection resumes. Every worker of the suite (the pod runner's
``python -m sessionops.worker``) starts this way, so the segment tests show that nothing a
segment does needs the packages kept out."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
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
from sessionops.worker.startup import DEFERRED_INIT
print(json.dumps({"modules": sorted(m for m, v in sys.modules.items() if v is not None and m not in before),
                  "gc_enabled": gc.isenabled(), "frozen": gc.get_freeze_count(), "main": callable(segment.main),
                  "initialized": {name: "__getattr__" not in vars(sys.modules[name])
                                  for name in DEFERRED_INIT if name in sys.modules}}))
"""

FIRST_USE = """
import json, sys, threading
from sessionops.worker.startup import load_segment
load_segment()
import langgraph_sdk, openai.types
from langsmith.types import Run
found = []
threads = [threading.Thread(target=lambda: found.append(langgraph_sdk.get_client)) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
try:
    openai.types.NoSuchType
    missing = False
except AttributeError:
    missing = True
print(json.dumps({"batch": openai.types.Batch is sys.modules["openai.types.batch"].Batch,
                  "run": Run.__module__, "threads": len(found) == 8 and len(set(found)) == 1, "missing": missing}))
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


def test_index_packages_wait_for_first_use(started: dict[str, Any]) -> None:
    """The generated API types of openai and langsmith, langgraph's server SDK, langchain's
    middleware and langchain-openai's models: the modules the segment uses are imported, the
    packages' ``__init__`` (every other module) is not."""
    from sessionops.worker.startup import DEFERRED_INIT

    assert started["initialized"] == dict.fromkeys(DEFERRED_INIT, False)
    modules = set(started["modules"])
    unused = {"openai.types.batch", "openai.types.eval_create_params", "openai.types.responses.response",
              "langsmith.types.run", "langsmith.types.sandbox_response", "langgraph_sdk.client",
              "langchain.agents.middleware.auto_mode", "langchain.agents.middleware.shell_tool",
              "langchain_openai.chat_models.azure", "langchain_openai.embeddings", "langchain_openai.llms"}
    assert not modules & unused, sorted(modules & unused)


def _constant(node: ast.stmt) -> bool:
    """A docstring, or a name bound to a literal (``__all__``, ``__version__``)."""
    if isinstance(node, ast.Expr):
        return isinstance(node.value, ast.Constant)
    if not isinstance(node, ast.Assign) or not all(isinstance(t, ast.Name) for t in node.targets):
        return False
    try:
        ast.literal_eval(node.value)
    except ValueError:
        return False
    return True


def test_deferred_packages_init_only_imports() -> None:
    """Deferring is safe only for an ``__init__`` without side effects (no registration, no
    rebuild of models) that binds no submodule's name to another object: imported early, the
    submodule would stay where the ``__init__`` puts that object. A new release may change either."""
    from sessionops.worker.startup import DEFERRED_INIT

    for name in DEFERRED_INIT:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None and spec.submodule_search_locations, name
        submodules = {p.stem if p.suffix == ".py" else p.name
                      for location in spec.submodule_search_locations for p in Path(location).iterdir()}
        for node in ast.parse(Path(spec.origin).read_text()).body:
            what = f"{name}: {ast.unparse(node)[:80]}"
            assert isinstance(node, ast.Import | ast.ImportFrom) or _constant(node), what
            if isinstance(node, ast.ImportFrom) and not (node.level == 1 and node.module is None):
                # ``from . import x`` binds the submodule itself; any other ``from`` binds objects.
                assert not {alias.asname or alias.name for alias in node.names} & submodules, what


def test_a_deferred_init_runs_whole_on_first_use() -> None:
    """Names the ``__init__`` exports resolve as without the deferral, also for threads asking at
    once; a name it does not export is still an ``AttributeError``."""
    out = subprocess.run([sys.executable, "-c", FIRST_USE], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout) == {"batch": True, "run": "langsmith.types.run", "threads": True, "missing": True}


def test_collection_resumes_with_the_imports_frozen(started: dict[str, Any]) -> None:
    assert started["gc_enabled"]
    assert started["frozen"] > 10_000
