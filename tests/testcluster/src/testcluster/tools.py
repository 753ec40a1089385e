"""Client binaries (kubectl, helm, a CLI under test) run against the cluster without blocking the
event loop the cluster may be serving from."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path


@dataclasses.dataclass
class Completed:
    returncode: int
    stdout: str
    stderr: str


async def run(binary: str | Path, *args: str, input: str | None = None, check: bool = True,
              env: dict[str, str] | None = None, timeout: float = 120) -> Completed:
    """``binary args...`` with ``input`` on stdin and ``env`` over this process's environment;
    ``check``: a non-zero exit fails with the command and both outputs."""
    proc = await asyncio.create_subprocess_exec(
        str(binary), *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, **(env or {})})
    out, err = await asyncio.wait_for(proc.communicate(input.encode() if input is not None else None), timeout)
    result = Completed(proc.returncode or 0, out.decode(), err.decode())
    if check and result.returncode != 0:
        raise AssertionError(f"{Path(str(binary)).name} {' '.join(args)} failed ({result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}")
    return result
