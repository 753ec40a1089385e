"""The local stack behind ``make dev`` / ``make dev-down`` / ``make demo`` (no container engine).

``up`` starts, in the background: the test cluster (``python -m tests.cluster serve``), the
replay model, the pod runner and the operator, installs the chart with the real ``helm``,
and returns when everything is ready. It writes ``.dev/kubeconfig``, ``.dev/env`` (the replay
URL, the database) and ``.dev/pids``; ``down`` stops exactly those processes and drops the
database ``up`` created. Without ``DATABASE_URL`` it starts an embedded PostgreSQL server
(``tests.pgserver``, state in ``.dev/postgres``) that ``down`` stops. ``demo`` applies ``examples/`` and shows a conversation with an
approval wait and a cancellation.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from tests import pgserver
from tests.stack import (
    OPERATOR_NS,
    ROOT,
    WEBHOOK_SERVICE,
    Stack,
    create_database,
    drop_database,
    free_port,
    install,
)

DEV = Path(os.environ.get("SESSIONOPS_DEV_DIR", ROOT / ".dev")).resolve()
NAMESPACE = "default"


def _spawn(name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    log = open(DEV / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
    return subprocess.Popen([sys.executable, *args], cwd=str(ROOT), stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})}, start_new_session=True)


def _wait_line(name: str, pattern: str, proc: subprocess.Popen, timeout: float = 60) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = (DEV / f"{name}.log").read_text(errors="replace")
        if match := re.search(pattern, text):
            return match
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited ({proc.returncode}); see .dev/{name}.log:\n{text[-2000:]}")
        time.sleep(0.1)
    raise SystemExit(f"{name} did not start in {timeout}s; see .dev/{name}.log")


def _record(name: str, proc: subprocess.Popen) -> None:
    with open(DEV / "pids", "a") as f:
        f.write(f"{name} {proc.pid}\n")


def _alive() -> bool:
    pids = DEV / "pids"
    if not pids.exists():
        return False
    try:
        for line in pids.read_text().splitlines():
            os.killpg(int(line.split()[1]), 0)
    except (ProcessLookupError, IndexError, ValueError):
        return False
    return True


def _database_server() -> str:
    """The admin DSN: ``DATABASE_URL`` if set (checked first: one clear line when unreachable), else embedded."""
    if dsn := os.environ.get("DATABASE_URL"):
        if problem := pgserver.unreachable(dsn):
            raise SystemExit(problem)
        return dsn
    try:
        dsn = pgserver.start(DEV / "postgres").dsn
    except pgserver.EmbeddedPostgresError as err:
        raise SystemExit(f"could not start the embedded PostgreSQL ({err}); set DATABASE_URL to a server you run") \
            from None
    print(f"embedded PostgreSQL at {dsn} (DATABASE_URL unset; data in {DEV / 'postgres'})")
    return dsn


def up() -> None:
    """Idempotent: a running stack is left as it is; a half-dead one is stopped and restarted."""
    if _alive():
        print("the local stack is already running (make dev-down stops it)")
        return
    if (DEV / "pids").exists():
        down()
    DEV.mkdir(exist_ok=True)
    admin = _database_server()
    for log in DEV.glob("*.log"):
        log.unlink()
    db_name, dsn = create_database(admin)
    (DEV / "database").write_text(json.dumps({"name": db_name, "admin": admin}))
    webhook_port, metrics_port = free_port(), free_port()
    kubeconfig = DEV / "kubeconfig"

    cluster = _spawn("cluster", "-m", "tests.cluster", "serve", "--kubeconfig", str(kubeconfig),
                     "--pod-logs", str(DEV / "pods"),
                     "--service", f"{OPERATOR_NS}/{WEBHOOK_SERVICE}=127.0.0.1:{webhook_port}")
    _record("cluster", cluster)
    _wait_line("cluster", r"serving (http://\S+)", cluster)
    replay = _spawn("replay", "-m", "sessionops.replay", "--host", "127.0.0.1", "--port", "0",
                    "--dirs", str(ROOT / "examples" / "replay"))
    _record("replay", replay)
    replay_url = _wait_line("replay", r"listening on (http://\S+)", replay).group(1)
    scenarios = sorted(p.stem for p in (ROOT / "examples" / "replay").glob("*.yaml"))

    stack = Stack(root=DEV, kubeconfig=kubeconfig, database_url=dsn, replay_url=replay_url, namespace=NAMESPACE,
                  webhook_port=webhook_port, metrics_port=metrics_port)
    asyncio.run(install(stack, scenarios, [NAMESPACE]))

    runner = _spawn("podrunner", "-m", "tests.podrunner", "--kubeconfig", str(kubeconfig),
                    "--workdirs", str(DEV / "workdirs"), "--log-dir", str(DEV / "pods"))
    _record("podrunner", runner)
    operator = _spawn("operator", "-m", "sessionops.manager", env=stack.operator_env)
    _record("operator", operator)

    async def ready() -> None:
        stack.operator = None
        await stack.wait_healthy(timeout=90)

    asyncio.run(ready())
    if operator.poll() is not None:
        raise SystemExit(f"the operator exited; see .dev/operator.log:\n{stack.operator_log()}")
    (DEV / "env").write_text(f"KUBECONFIG={kubeconfig}\nSESSIONOPS_REPLAY_URL={replay_url}\n"
                             f"DATABASE_URL={dsn}\n")
    print(f"local stack ready: kubectl --kubeconfig {kubeconfig} get asess,ainput,arun")
    print(f"replay model at {replay_url}; logs in .dev/*.log; stop with `make dev-down`")


def down(quiet: bool = False) -> None:
    """Stops what ``up`` started, in reverse order: processes, the stack's database, the embedded server."""
    pids = DEV / "pids"
    if not pids.exists() and not (DEV / "database").exists() and not (DEV / "postgres" / pgserver.STATE).exists():
        if not quiet:
            print("the local stack is not running")
        return
    entries = [line.split() for line in pids.read_text().splitlines() if line.strip()] if pids.exists() else []
    for name, pid in reversed(entries):  # the operator first, the cluster last
        try:
            os.killpg(int(pid), signal.SIGTERM)
        except ProcessLookupError:
            continue
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                os.killpg(int(pid), 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.killpg(int(pid), signal.SIGKILL)
        print(f"stopped {name} ({pid})")
    pids.unlink(missing_ok=True)
    database = DEV / "database"
    if database.exists():
        record = json.loads(database.read_text())
        with contextlib.suppress(psycopg.OperationalError):  # a server that is gone took the database with it
            drop_database(record["name"], record["admin"])
        database.unlink()
    if pgserver.stop(DEV / "postgres"):
        print("stopped the embedded PostgreSQL")


async def demo() -> None:
    env = dict(line.split("=", 1) for line in (DEV / "env").read_text().splitlines() if "=" in line)
    stack = Stack(root=DEV, kubeconfig=Path(env["KUBECONFIG"]), database_url=env["DATABASE_URL"],
                  replay_url=env["SESSIONOPS_REPLAY_URL"], namespace=NAMESPACE, webhook_port=0, metrics_port=0)

    async def show(*args: str) -> None:
        print(f"\n$ kubectl {' '.join(args)}")
        print((await stack.kubectl(*args)).stdout.rstrip())

    def phase(*phases: str):
        return lambda obj: (obj.get("status") or {}).get("phase") in phases

    for manifest in sorted((ROOT / "examples").glob("0*.yaml")):
        await show("apply", "-f", str(manifest.relative_to(ROOT)))
    run = await stack.wait_for("arun", "demo-t1", phase("Waiting", "Failed"), timeout=120)
    print("\nThe agent wrote notes and asked to run a shell command: the turn waits for an approval.")
    await show("get", "asess,ainput,arun")
    waitpoint = run["status"]["waitpoint"]
    for call in waitpoint["calls"]:
        print(f"  waiting: {call['tool']} {json.dumps(call['args'])} (callId {call['callId']})")
    approve = {"apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentInput", "metadata": {"name": "demo-approve"},
               "spec": {"sessionRef": {"name": "demo"}, "kind": "Resume", "run": "demo-t1",
                        "waitpointId": waitpoint["id"],
                        "decisions": [{"callId": c["callId"], "decision": "Approve"} for c in waitpoint["calls"]]}}
    await stack.apply(approve)
    print("\n$ kubectl apply -f approve.yaml   # a complete Resume input: one decision per pending call")
    run = await stack.wait_for("arun", "demo-t1", phase("Succeeded", "Failed"), timeout=120)
    print(f"\nassistant: {run['status']['result']['text']}")
    await show("get", "arun")

    print("\nNow a second session whose waiting turn is cancelled:")
    session = {"apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentSession", "metadata": {"name": "demo-cancel"},
               "spec": {"agentRef": {"name": "helper"}, "model": "replay/parallel-approval"}}
    message = {"apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentInput", "metadata": {"name": "demo-cancel-1"},
               "spec": {"sessionRef": {"name": "demo-cancel"}, "messages": [{"content": "Clean up the disk."}]}}
    await stack.apply(session)
    await stack.apply(message)
    await stack.wait_for("arun", "demo-cancel-t1", phase("Waiting"), timeout=120)
    await show("patch", "arun", "demo-cancel-t1", "--type=merge", "-p", '{"spec":{"cancel":true}}')
    run = await stack.wait_for("arun", "demo-cancel-t1", phase("Cancelled"), timeout=60)
    print(f"cleanup steps: {', '.join(run['status']['cancellation']['completedSteps'])}")
    await stack.wait_for("asess", "demo-cancel", phase("Paused"), timeout=30)
    await show("get", "asess", "-o", "wide")
    print("\nThe queue stays paused until a Continue input; try it yourself:\n"
          "  kubectl --kubeconfig .dev/kubeconfig apply -f - <<EOF\n"
          "  {apiVersion: sessionops.dev/v1alpha1, kind: AgentInput, metadata: {name: demo-continue},\n"
          "   spec: {sessionRef: {name: demo-cancel}, kind: Continue}}\n  EOF")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.localstack", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down", "demo"])
    args = parser.parse_args(argv)
    if args.command == "up":
        try:
            up()
        except BaseException:
            down(quiet=True)
            raise
    elif args.command == "down":
        down()
    else:
        asyncio.run(demo())
    return 0


if __name__ == "__main__":
    sys.exit(main())
