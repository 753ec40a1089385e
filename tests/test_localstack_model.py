"""The demo with a real model from the environment (``SESSIONOPS_DEMO_MODEL=openai/...``): the
key goes into a Secret, never into the ConfigMap. Apart from ``test_localstack.py`` so the two
stacks (each a minute or more) run in parallel under ``--dist loadfile``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from sessionops.replay import running_replay_server
from tests.localstack import DEMO_KEY_SECRET
from tests.stack import CONFIGMAP, EXAMPLES_REPLAY, OPERATOR_NS, ROOT
from tests.test_localstack import TRY_IT, assert_stopped, logs, paste, printed_block, run


def test_a_real_model_from_the_environment_is_the_demo_model_with_its_key_in_a_secret(tmp_path: Path) -> None:
    dev, key = tmp_path / "dev", "sk-demo-0123456789"
    pids: list[int] = []
    # The replay server stands in for an OpenAI-compatible provider that requires its key.
    with running_replay_server(dirs=[EXAMPLES_REPLAY], api_key=key) as provider:
        env = {"SESSIONOPS_DEMO_MODEL": "openai/assistant", "OPENAI_API_KEY": key,
               "OPENAI_BASE_URL": f"{provider.url}/v1"}
        try:
            up = run("up", dev, **env)
            assert up.returncode == 0, up.stdout + up.stderr + logs(dev)
            pids = [int(line.split()[1]) for line in (dev / "pids").read_text().splitlines()]
            assert "default model (the demo session's): openai/assistant" in up.stdout
            demo = run("demo", dev, **env)
            assert demo.returncode == 0, demo.stdout + demo.stderr + logs(dev)
            assert "Demo model: openai/assistant" in demo.stdout
            assert 'You said: "Hello! What can you do?"' in demo.stdout
            pasted = paste(printed_block(demo.stdout, TRY_IT))
            assert pasted.returncode == 0, pasted.stdout + pasted.stderr
            assert 'You said: "Thanks! Now tell me a short joke."' in pasted.stdout

            kubectl = [str(ROOT / ".tools" / "bin" / "kubectl"), "--kubeconfig", str(dev / "admin.kubeconfig")]
            config = json.loads(subprocess.run([*kubectl, "get", "configmap", CONFIGMAP, "-n", OPERATOR_NS, "-o",
                                                "json"], capture_output=True, text=True, check=True).stdout)
            secret = json.loads(subprocess.run([*kubectl, "get", "secret", DEMO_KEY_SECRET, "-n", "default", "-o",
                                                "json"], capture_output=True, text=True, check=True).stdout)
        finally:
            down = run("down", dev)
        served = [r for r in provider.records if r["status"] == 200]
    assert down.returncode == 0
    assert_stopped(pids)
    catalog = yaml.safe_load(config["data"]["config.yaml"])
    assert catalog["defaults"]["model"] == "openai/assistant"
    assert {"name": "openai/assistant", "provider": "openai", "model": "assistant", "endpoint": f"{provider.url}/v1",
            "secretKeyRef": {"name": DEMO_KEY_SECRET, "key": "api-key"}}.items() <= next(
        m for m in catalog["models"] if m["name"] == "openai/assistant").items()
    assert key not in json.dumps(config), "the key is never in the ConfigMap"
    assert "api-key" in secret["data"]
    assert len(served) >= 2 and all(r["apiKey"] == key and r["model"] == "assistant" for r in served)
