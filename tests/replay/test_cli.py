"""`python -m sessionops.replay` as the local stack runs it: a real subprocess."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import aiohttp

from .conftest import EXAMPLES


async def spawn(*args: str, env_dirs: str = "") -> asyncio.subprocess.Process:
    env = {**os.environ, "SESSIONOPS_REPLAY_DIRS": env_dirs}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sessionops.replay",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )


async def test_the_cli_serves_env_and_explicit_dirs_and_stops_on_sigterm(tmp_path: Path) -> None:
    (tmp_path / "extra.yaml").write_text("responses: [{content: extra}]")
    process = await spawn("--port", "0", "--dirs", str(EXAMPLES), env_dirs=str(tmp_path))
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), timeout=15)).decode()
        match = re.search(r"listening on (http://\S+)", line)
        assert match, line
        async with aiohttp.ClientSession() as http, http.get(match.group(1) + "/v1/models") as resp:
            models = {m["id"] for m in (await resp.json())["data"]}
        assert {"replay/extra", "replay/hello"} <= models
    finally:
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), timeout=15) == 0


async def test_the_cli_exits_2_naming_a_bad_scenario_file(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("responses: [{toolCalls: [{args: {}}]}]")
    process = await spawn("--port", "0", "--dirs", str(tmp_path))
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=15)
    assert process.returncode == 2
    assert "bad.yaml: responses.0.toolCalls.0.name: Field required" in stderr.decode()
