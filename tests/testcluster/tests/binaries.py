"""The real kubectl and helm binaries, found on PATH, run without blocking the event loop the test
cluster serves from."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
from pathlib import Path

import pytest


@dataclasses.dataclass
class Completed:
    returncode: int
    stdout: str
    stderr: str


def binary(name: str) -> Path:
    """``name`` on PATH; the test fails (it does not skip) without it."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not on PATH: the test cluster's tests run the real binary")
    return Path(found)


async def run(binary: str | Path, *args: str, input: str | None = None, check: bool = True,
              env: dict[str, str] | None = None, timeout: float = 120) -> Completed:
    proc = await asyncio.create_subprocess_exec(
        str(binary), *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, **(env or {})})
    out, err = await asyncio.wait_for(proc.communicate(input.encode() if input is not None else None), timeout)
    result = Completed(proc.returncode or 0, out.decode(), err.decode())
    if check and result.returncode != 0:
        raise AssertionError(f"{Path(str(binary)).name} {' '.join(args)} failed ({result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}")
    return result
