"""The worker pod's tools process for the benchmarks that run the worker without the pod runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def start_tools(job: dict[str, Any], workdir: Path, socket: Path) -> subprocess.Popen[bytes]:
    """The Job's tools container (``python -m sessionops.toolbox``) with its own env, paths on this host."""
    [container] = job["spec"]["template"]["spec"]["initContainers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    env.update(SESSIONOPS_WORKDIR=str(workdir), SESSIONOPS_TOOLS_SOCKET=str(socket), HOME=str(workdir))
    env.update({k: os.environ[k] for k in ("PATH", "PYTHONPATH") if k in os.environ})
    return subprocess.Popen([sys.executable, "-m", "sessionops.toolbox"], env=env, cwd=workdir,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
