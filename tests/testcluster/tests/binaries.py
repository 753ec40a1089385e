"""The real kubectl and helm binaries, found on PATH (run with ``testcluster.tools.run``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from testcluster.tools import Completed, run

__all__ = ["Completed", "binary", "run"]


def binary(name: str) -> Path:
    """``name`` on PATH; the test fails (it does not skip) without it."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not on PATH: the test cluster's tests run the real binary")
    return Path(found)
