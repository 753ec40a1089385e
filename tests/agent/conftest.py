from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.pg import pg_dsn, pg_template, saver  # noqa: F401  (fixtures)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path
