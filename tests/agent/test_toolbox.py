"""The tools process protocol: a real server on a Unix socket, its bounds and timeouts."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessionops.execution import jobs
from sessionops.toolbox import protocol
from sessionops.toolbox.client import ToolboxClient, ToolboxFault, ToolboxUnavailable
from sessionops.toolbox.ops import MAX_SHELL_OUTPUT, Operations, ToolError
from sessionops.toolbox.server import ToolsServer

pytestmark = pytest.mark.integration


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ToolboxClient, Path]]:
    work = tmp_path / "work"
    work.mkdir()
    server = ToolsServer(tmp_path / "tools.sock", Operations(work, max_timeout=5))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield ToolboxClient(tmp_path / "tools.sock"), work
    server.shutdown()
    server.server_close()


def test_ping_reports_the_enforced_maximum(served) -> None:
    client, _ = served
    assert client.wait_ready(5) == {"maxTimeoutSeconds": 5}


def test_operations_round_trip(served) -> None:
    client, work = served
    assert client.call("write_file", {"path": "a/b.txt", "content": "héllo"}) == {
        "path": "a/b.txt", "text": "wrote 5 characters to a/b.txt"}
    assert (work / "a/b.txt").read_text() == "héllo"
    assert client.call("read_file", {"path": "a/b.txt"}) == {"text": "héllo"}
    assert client.call("list_files", {"path": "."}) == {"text": "a/"}
    assert client.call("run_shell", {"command": "cat a/b.txt; exit 4", "timeoutSeconds": None}) == {
        "text": "exit code 4\nhéllo"}


def test_expected_failures_are_tool_errors(served) -> None:
    client, _ = served
    with pytest.raises(ToolError, match="contains '..'"):
        client.call("read_file", {"path": "../x"})
    with pytest.raises(ToolError, match="between 1 and 5"):
        client.call("run_shell", {"command": "true", "timeoutSeconds": 6})


def test_malformed_requests_are_faults(served) -> None:
    client, _ = served
    with pytest.raises(ToolboxFault, match="args.path must be a str"):
        client.call("read_file", {"path": 3})
    with pytest.raises(ToolboxFault, match="unknown op"):
        client.call("chmod", {})
    raw = socket.socket(socket.AF_UNIX)
    raw.connect(client.path)
    raw.sendall(b'{"v": 9, "op": "ping"}\n')
    assert b"unsupported protocol version 9" in raw.recv(4096)
    raw.close()


def test_the_command_timeout_kills_the_process_group(served) -> None:
    client, work = served
    started = time.monotonic()
    with pytest.raises(ToolError, match="timed out after 1s"):
        client.call("run_shell", {"command": "(sleep 30; touch late) & echo started; sleep 30",
                                  "timeoutSeconds": 1})
    assert time.monotonic() - started < 10
    time.sleep(0.2)
    assert not (work / "late").exists()


def test_shell_output_is_bounded(served) -> None:
    client, _ = served
    text = client.call("run_shell", {"command": "head -c 500000 /dev/zero | tr '\\0' a", "timeoutSeconds": 5})["text"]
    assert len(text) < MAX_SHELL_OUTPUT + 200 and "bytes of output omitted" in text


def test_a_response_over_the_bound_is_a_fault(tmp_path: Path) -> None:
    path = tmp_path / "big.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)

    def answer() -> None:
        conn, _ = listener.accept()
        conn.recv(1024)
        conn.sendall(b"x" * (protocol.MAX_RESPONSE_BYTES + 10))
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    with pytest.raises(ToolboxFault, match="larger than"):
        ToolboxClient(path).call("ping", {})
    listener.close()


def test_no_server_is_unavailable_with_the_socket_named(tmp_path: Path) -> None:
    with pytest.raises(ToolboxUnavailable, match=f"no tools process answered on {tmp_path}/none.sock within 0s"):
        ToolboxClient(tmp_path / "none.sock").wait_ready(0.2)


def test_job_manifest_puts_the_tools_in_a_sidecar_without_credentials() -> None:
    from sessionops.api.agent import WorkerSettings
    from sessionops.api.config import OperatorConfig

    config = OperatorConfig.model_validate({
        "defaults": {"model": "m"}, "models": [{"name": "m", "provider": "openai", "model": "gpt",
                                                "secretKeyRef": {"name": "k", "key": "api-key"}}],
        "worker": {"maxCommandTimeoutSeconds": 600, "toolsImage": "reg/tools:1"}})
    run = {"metadata": {"name": "s1-t1", "namespace": "ns", "uid": "u"},
           "spec": {"sessionRef": {"name": "s1"}, "contextSnapshot": {"model": "m"}}}
    body = jobs.job_body(run, 1, "Start", config=config, worker=WorkerSettings(command_timeout_seconds=9000 // 10))
    pod = body["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    [tools] = pod["initContainers"]
    [worker] = pod["containers"]
    assert tools["restartPolicy"] == "Always" and tools["image"] == "reg/tools:1"
    assert tools["securityContext"]["runAsUser"] == jobs.TOOLS_UID != pod["securityContext"]["runAsUser"]
    assert not any("valueFrom" in e for e in tools["env"]) and "envFrom" not in tools
    # The Agent asked for 900 s; the operator's bound (600 s) wins.
    assert {e["name"]: e["value"] for e in tools["env"]}["SESSIONOPS_TOOLS_MAX_TIMEOUT_SECONDS"] == "600"
    tools_volumes = {m["name"] for m in tools["volumeMounts"]}
    assert tools_volumes == {"work", "tools-tmp", "tools-socket"}
    worker_volumes = {m["name"]: m["mountPath"] for m in worker["volumeMounts"]}
    assert worker_volumes["kube-api-access"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    assert "work" not in worker_volumes and worker["workingDir"] != jobs.WORKDIR
    assert worker_volumes["tools-socket"] == jobs.TOOLS_SOCKET_DIR
    [projected] = [v for v in pod["volumes"] if v["name"] == "kube-api-access"]
    kinds = [next(iter(s)) for s in projected["projected"]["sources"]]
    assert kinds == ["serviceAccountToken", "configMap", "downwardAPI"]
    assert jobs.command_timeout(config, WorkerSettings(command_timeout_seconds=30)) == 30
