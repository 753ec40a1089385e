"""Local-only integration tests: the whole stack plus direct access to the test cluster
(SAR policies, fault injection) and to the operator's webhook server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.stack import Stack, running_stack


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def local(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Stack, Any]]:
    async with running_stack(Path(tmp_path_factory.mktemp("stack")), checkpoint_retention=1) as (stack, cluster):
        yield stack, cluster
