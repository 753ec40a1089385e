"""The package stands alone: it imports nothing of the product whose tests use it, declares every
distribution it imports, and says its version."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import testcluster

PACKAGE = Path(__file__).resolve().parents[1]
SOURCES = PACKAGE / "src" / "testcluster"
PROJECT = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
PRODUCT = ("sessionops", "tests")
"""The product's package and its test package."""


def imports(path: Path) -> set[str]:
    """The absolute module names ``path`` imports, at any depth (function-level imports too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def all_imports() -> dict[str, set[str]]:
    return {path.relative_to(SOURCES).as_posix(): imports(path) for path in sorted(SOURCES.rglob("*.py"))}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_scan_sees_the_imports() -> None:
    scanned = all_imports()
    assert "kmock" in scanned["server.py"] and "re2" in scanned["schema.py"]  # top level and in a function
    assert "kubernetes" in scanned["podrunner/runner.py"]


def test_nothing_of_the_product_is_imported() -> None:
    product = {f"{path}: {name}" for path, names in all_imports().items()
               for name in names if name.split(".")[0] in PRODUCT}
    assert product == set()


def test_every_imported_distribution_is_a_declared_dependency() -> None:
    declared = {normalized(re.split(r"[ <>=!~;\[]", d, maxsplit=1)[0]) for d in PROJECT["dependencies"]}
    providers = importlib.metadata.packages_distributions()
    third_party = {name.split(".")[0] for names in all_imports().values() for name in names} \
        - set(sys.stdlib_module_names) - {"testcluster"}
    undeclared = {top: providers.get(top) for top in third_party
                  if not declared & {normalized(d) for d in providers.get(top, [])}}
    assert undeclared == {}


def test_the_version_is_the_distributions() -> None:
    assert testcluster.__version__ == PROJECT["version"]
