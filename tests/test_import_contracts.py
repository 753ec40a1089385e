"""Each import contract in pyproject.toml catches the violation it exists for.

``make lint`` shows the contracts kept on the real tree; that proves nothing about a contract
that cannot fail. Here each case copies the package, adds one import that breaks exactly one
rule of the layering, and runs the real ``lint-imports`` on the copy: the named contract, and
only it (or the contracts in ``ALSO``), must report BROKEN. A contract without a case here fails ``test_every_contract_has_a_case``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# contract id -> (module file under operator/sessionops, the import line added to it). Each line is
# a violation the contract's docstring promises to catch (most found in a review that added them).
CASES: dict[str, tuple[str, str]] = {
    # A controller importing a sibling controller: siblings are independent.
    "layers": ("scheduling/queue.py", "from sessionops.execution import segments"),
    # A controller calling the API server with the client library instead of the platform adapter.
    "clients": ("scheduling/reconcile.py", "import kubernetes"),
    # A pure decision reaching an adapter.
    "decisions": ("execution/segments.py", "from sessionops.platform import kube"),
    # The agent's tools reaching the cluster (the cancellation cleanup builds the agent's graph,
    # so its contract breaks too: ALSO).
    "agent": ("agent/tools.py", "from sessionops.platform import kube"),
    # The tools process importing a library that could parse or send a credential.
    "toolbox": ("toolbox/ops.py", "import pydantic"),
    # API types pulling in a framework.
    "api": ("api/run.py", "import langgraph"),
    # The checkpoint cleanup talking to Kubernetes while it rewrites a thread.
    "checkpoint-steps": ("cancellation/cleanup.py", "from sessionops.platform import kube"),
}
# The violations a review found the earlier contracts missed (issue 16), each with a contract that
# now breaks on it: (module, import line, a contract that must report BROKEN).
FOUND_IN_REVIEW = [
    ("agent/tools.py", "import kubernetes", "agent"),
    ("agent/tools.py", "import kopf", "agent"),
    ("agent/tools.py", "from sessionops.platform import kube", "agent"),
    ("cancellation/cleanup.py", "from sessionops.platform import kube", "checkpoint-steps"),
    ("worker/plan.py", "import kubernetes", "decisions"),
    ("admission/inputs.py", "from sessionops.scheduling import queue", "layers"),
]
ALSO = {"agent": {"checkpoint-steps"}}
"""Contracts a case breaks besides its own, because a module they guard imports the violator."""
UPWARD = ("platform/locks.py", "from sessionops.manager import runtime")  # a lower layer importing a process


def _contracts() -> dict[str, str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {c["id"]: c["name"] for c in config["tool"]["importlinter"]["contracts"]}


def _lint(tmp_path: Path, module: str | None = None, line: str | None = None) -> dict[str, str]:
    """Runs lint-imports on a copy of the package with ``line`` added to ``module``: {name: KEPT|BROKEN}."""
    copy = tmp_path / "operator"
    shutil.copytree(ROOT / "operator" / "sessionops", copy / "sessionops",
                    ignore=shutil.ignore_patterns("__pycache__"))
    if module is not None:
        target = copy / "sessionops" / module
        target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    done = subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=tmp_path, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(copy)}, timeout=120)
    # Contract names wrap over lines in the report: join it, then find each name's verdict.
    report = " ".join(done.stdout.split())
    verdicts = {}
    for name in _contracts().values():
        found = re.search(re.escape(" ".join(name.split())) + r" (KEPT|BROKEN)", report)
        assert found, f"no verdict for {name!r} in:\n{done.stdout}\n{done.stderr}"
        verdicts[name] = found[1]
    assert (done.returncode != 0) == ("BROKEN" in verdicts.values()), done.stdout
    return verdicts


def test_every_contract_has_a_case() -> None:
    assert set(_contracts()) == set(CASES)


def test_the_tree_keeps_every_contract(tmp_path: Path) -> None:
    assert set(_lint(tmp_path).values()) == {"KEPT"}


@pytest.mark.parametrize("contract", sorted(CASES))
def test_a_violating_import_breaks_its_contract(contract: str, tmp_path: Path) -> None:
    module, line = CASES[contract]
    verdicts = _lint(tmp_path, module, line)
    broken = {name for name, verdict in verdicts.items() if verdict == "BROKEN"}
    names = _contracts()
    assert broken == {names[c] for c in {contract, *ALSO.get(contract, ())}}, f"{line!r} in {module}: broken {broken}"


def test_a_lower_layer_importing_a_process_breaks_the_layers(tmp_path: Path) -> None:
    verdicts = _lint(tmp_path, *UPWARD)
    assert verdicts[_contracts()["layers"]] == "BROKEN"


@pytest.mark.parametrize(("module", "line", "contract"), FOUND_IN_REVIEW,
                         ids=[f"{line} in {module}" for module, line, _ in FOUND_IN_REVIEW])
def test_what_the_review_found_is_caught(module: str, line: str, contract: str, tmp_path: Path) -> None:
    assert _lint(tmp_path, module, line)[_contracts()[contract]] == "BROKEN"
