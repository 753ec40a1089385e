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


async def spawn(*args: str, env_dirs: str = "", **extra_env: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "SESSIONOPS_REPLAY_DIRS": env_dirs, **extra_env}
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


async def test_the_cli_requires_the_bearer_key_given_in_its_environment() -> None:
    process = await spawn("--port", "0", "--dirs", str(EXAMPLES), SESSIONOPS_REPLAY_API_KEY="sk-cli")
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), timeout=15)).decode()
        url = re.search(r"listening on (http://\S+)", line).group(1)  # type: ignore[union-attr]
        body = {"model": "replay/hello", "messages": [{"role": "user", "content": "hi"}]}
        statuses = []
        async with aiohttp.ClientSession() as http:
            for headers in ({}, {"Authorization": "Bearer sk-cli"}):
                async with http.post(url + "/v1/chat/completions", json=body, headers=headers) as resp:
                    statuses.append(resp.status)
        assert statuses == [401, 200]
        assert "sk-cli" not in line  # the key is never printed
    finally:
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), timeout=15) == 0
