"""The local stack behind ``make dev`` / ``make dev-down`` / ``make demo`` (no container engine).

``up`` starts, in the background: the test cluster (``python -m testcluster serve``), the
replay model (``examples/replay`` plus SESSIONOPS_REPLAY_DIRS; every scenario it loads is in
the catalog as ``replay/<name>``), the pod runner and the operator, installs the chart with
the real ``helm``, and returns when everything is ready. The default model is
``replay/assistant`` (it answers every message), or SESSIONOPS_DEMO_MODEL. It writes
``.dev/kubeconfig`` (the user ``alice``, bound to ``edit`` in the namespace: what a person using
agents has), ``.dev/admin.kubeconfig`` (``kubernetes-admin``, for set-up), ``.dev/env`` (the replay URL, the database, the demo model) and
``.dev/pids``; ``down`` stops exactly those processes and drops the database ``up`` created.
Without ``DATABASE_URL`` it starts an embedded PostgreSQL server (``tests.pgserver``, state in
``.dev/postgres``) that ``down`` stops. ``demo`` applies ``examples/`` and converses through
the plugin and kubectl: an approval, a cancellation, a continue; then it prints commands to try.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg

from tests import pgserver
from tests.stack import (
    GO_BINARY,
    OPERATOR_NS,
    POD_RUNNER_ARGS,
    ROOT,
    TOOLS,
    USER,
    USER_GROUPS,
    WEBHOOK_SERVICE,
    Stack,
    create_database,
    drop_database,
    free_port,
    install,
    kubeconfig_with_token,
)

DEV = Path(os.environ.get("SESSIONOPS_DEV_DIR", ROOT / ".dev")).resolve()
NAMESPACE = "default"
DEMO_MODEL_ENV = "SESSIONOPS_DEMO_MODEL"
DEFAULT_DEMO_MODEL = "replay/assistant"
DEMO_KEY_SECRET = "sessionops-demo-model"
OPENAI_ENDPOINT = "https://api.openai.com/v1"


@dataclasses.dataclass(frozen=True)
class DemoModel:
    """The system default model of the local stack, so the demo session uses it."""

    name: str
    entry: dict[str, Any] | None = None  # a catalog entry to add; None: a replay scenario, registered anyway
    api_key: str | None = dataclasses.field(default=None, repr=False)


def demo_model(environ: Mapping[str, str]) -> DemoModel:
    """From SESSIONOPS_DEMO_MODEL (``openai/<model>`` or ``replay/<scenario>``), OPENAI_API_KEY and
    OPENAI_BASE_URL; checked before anything starts. The key goes to a Secret in the worker
    namespace, referenced by ``secretKeyRef`` (the Job mounts it there as a file), never to the ConfigMap."""
    value = environ.get(DEMO_MODEL_ENV, "").strip() or DEFAULT_DEMO_MODEL
    provider, _, model = value.partition("/")
    if provider == "replay" and model:
        return DemoModel(value)
    if provider != "openai" or not model:
        raise SystemExit(f"{DEMO_MODEL_ENV}={value!r}: expected openai/<model> (e.g. openai/gpt-4o-mini, with "
                         "OPENAI_API_KEY) or replay/<scenario>")
    key = environ.get("OPENAI_API_KEY", "").strip()
    if not key:
        raise SystemExit(f"{DEMO_MODEL_ENV}={value}: OPENAI_API_KEY is not set; export the model's API key "
                         "(OPENAI_BASE_URL optionally names an OpenAI-compatible endpoint)")
    endpoint = environ.get("OPENAI_BASE_URL", "").strip() or OPENAI_ENDPOINT
    entry = {"name": value, "provider": "openai", "model": model, "endpoint": endpoint,
             "secretKeyRef": {"name": DEMO_KEY_SECRET, "key": "api-key"}}
    return DemoModel(value, entry, key)


def loaded_scenarios(replay_url: str) -> list[str]:
    """What the replay process says it loaded (examples plus SESSIONOPS_REPLAY_DIRS): the catalog gets exactly these."""
    with urllib.request.urlopen(f"{replay_url}/scenarios", timeout=10) as response:
        return sorted(scenario["name"] for scenario in json.load(response))


def _spawn(name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    log = open(DEV / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
    # The demo model's key reaches workers only through its Secret, as in a cluster.
    inherited = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    return subprocess.Popen([sys.executable, *args], cwd=str(ROOT), stdout=log, stderr=subprocess.STDOUT,
                            env={**inherited, **(env or {})}, start_new_session=True)


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
    """The admin DSN (``pgserver.resolve_dsn``): one clear line, before anything starts, when there is none."""
    try:
        dsn = pgserver.resolve_dsn(DEV / "postgres")
    except pgserver.EmbeddedPostgresError as err:
        raise SystemExit(str(err)) from None
    if not os.environ.get("DATABASE_URL"):
        print(f"embedded PostgreSQL at {dsn} (DATABASE_URL unset; data in {DEV / 'postgres'})")
    return dsn


def up(model: DemoModel) -> None:
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
    admin_kubeconfig = DEV / "admin.kubeconfig"
    user_token = secrets.token_urlsafe(24)
    tokens = DEV / "tokens.csv"
    tokens.write_text(f'{user_token},{USER},{USER},"{",".join(USER_GROUPS)}"\n')
    tokens.chmod(0o600)

    cluster = _spawn("cluster", "-m", "testcluster", "serve", "--kubeconfig", str(admin_kubeconfig),
                     "--token-auth-file", str(tokens), "--pod-logs", str(DEV / "pods"),
                     "--service", f"{OPERATOR_NS}/{WEBHOOK_SERVICE}=127.0.0.1:{webhook_port}", env=dict([GO_BINARY]))
    _record("cluster", cluster)
    _wait_line("cluster", r"serving (https://\S+)", cluster)
    kubeconfig = kubeconfig_with_token(admin_kubeconfig, DEV / "kubeconfig", user_token, NAMESPACE)
    replay = _spawn("replay", "-m", "sessionops.replay", "--host", "127.0.0.1", "--port", "0",
                    "--dirs", str(ROOT / "examples" / "replay"))
    _record("replay", replay)
    replay_url = _wait_line("replay", r"listening on (http://\S+)", replay).group(1)
    scenarios = loaded_scenarios(replay_url)
    if model.entry is None and model.name.removeprefix("replay/") not in scenarios:
        raise SystemExit(f"{DEMO_MODEL_ENV}={model.name}: no such replay scenario; loaded: {', '.join(scenarios)}")

    stack = Stack(root=DEV, kubeconfig=kubeconfig, database_url=dsn, replay_url=replay_url, namespace=NAMESPACE,
                  webhook_port=webhook_port, metrics_port=metrics_port, admin_kubeconfig=admin_kubeconfig)
    asyncio.run(install(stack, scenarios, [NAMESPACE], default_model=model.name,
                        models=[model.entry] if model.entry else []))
    if model.api_key:
        # Through stdin: the key never appears in a process listing. Re-applying is harmless.
        asyncio.run(stack.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": DEMO_KEY_SECRET},
                                 "stringData": {"api-key": model.api_key}}, NAMESPACE, admin=True))

    runner = _spawn("podrunner", "-m", "testcluster.podrunner", "--kubeconfig", str(admin_kubeconfig),
                    "--workdirs", str(DEV / "workdirs"), "--log-dir", str(DEV / "pods"), *POD_RUNNER_ARGS)
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
                             f"DATABASE_URL={dsn}\nADMIN_KUBECONFIG={admin_kubeconfig}\n{DEMO_MODEL_ENV}={model.name}\n")
    print(f"local stack ready: kubectl --kubeconfig {kubeconfig} get asess,ainput,arun  (as {USER}, edit in "
          f"{NAMESPACE}; {admin_kubeconfig} is the administrator's)")
    print(f"replay model at {replay_url}, in the catalog: {', '.join('replay/' + s for s in scenarios)}")
    print(f"default model (the demo session's): {model.name}; logs in {DEV}/*.log; stop with `make dev-down`")


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


# What the demo asks the assistant to do, one cue word each (examples/replay/assistant.yaml).
CUES = {"note": "writes your message to notes.txt and reads it back",
        "shell": "runs a shell command: run_shell waits for your approval",
        "question": "asks you a question (ask_user): answer it with `kubectl sessionops answer`",
        "delegate": "hands a task to a child session and reports its answer"}


def try_it_commands(model: str) -> list[str]:
    """The commands the demo prints for the reader to paste, in an order that works after the demo."""
    if model != DEFAULT_DEMO_MODEL:
        return ['kubectl sessionops send demo "Thanks! Now tell me a short joke." --watch',
                "kubectl sessionops status demo"]
    return ['kubectl sessionops send demo "Take a note: the demo works." --watch',
            'kubectl sessionops send demo "I have a question for you." --watch',
            "kubectl sessionops answer demo green",
            "kubectl sessionops watch demo",
            'kubectl sessionops send demo "Run it in the shell once more." --watch',
            "kubectl sessionops cancel demo --wait",
            "kubectl sessionops continue demo",
            'kubectl sessionops send demo "Delegate a greeting to a helper." --watch',
            "kubectl sessionops watch demo --until-done",
            "kubectl sessionops status demo",
            "kubectl get asess,ainput,arun"]


def shell_setup(kubeconfig: Path) -> list[str]:
    """Lines that make a pasted command find the stack, kubectl, helm and the plugin."""
    tools = shlex.quote(f"{TOOLS}:{Path(sys.executable).parent}")
    return [f"cd {shlex.quote(str(ROOT))}", f"export KUBECONFIG={shlex.quote(str(kubeconfig))}",
            f'export PATH={tools}:"$PATH"   # kubectl, helm, kubectl-sessionops']


def demo() -> None:
    """Runs each command exactly as it prints it (a shell, the printed environment), so what the
    reader copies is what ran; ends with commands to try that the demo does not run."""
    env_file = DEV / "env"
    if not env_file.exists():
        raise SystemExit("the local stack is not running: start it with `make dev` (or `make demo`)")
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    model = env.get(DEMO_MODEL_ENV, DEFAULT_DEMO_MODEL)
    wanted = os.environ.get(DEMO_MODEL_ENV, "").strip()
    if wanted and wanted != model:
        raise SystemExit(f"{DEMO_MODEL_ENV}={wanted}, but the running local stack was started with {model}: "
                         "run `make dev-down`, then `make demo` again")
    kubeconfig = Path(env["KUBECONFIG"])
    stack = Stack(root=DEV, kubeconfig=kubeconfig, database_url=env["DATABASE_URL"],
                  replay_url=env["SESSIONOPS_REPLAY_URL"], namespace=NAMESPACE, webhook_port=0, metrics_port=0,
                  admin_kubeconfig=Path(env["ADMIN_KUBECONFIG"]))
    shell_env = {**os.environ, "KUBECONFIG": str(kubeconfig),
                 "PATH": f"{TOOLS}:{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}

    def sh(command: str) -> str:
        print(f"\n$ {command}", flush=True)
        done = subprocess.run(["bash", "-c", command], cwd=ROOT, env=shell_env, capture_output=True, text=True,
                              timeout=300)
        print((done.stdout + done.stderr).rstrip(), flush=True)
        if done.returncode != 0:
            raise SystemExit(f"demo step failed (exit {done.returncode}): {command}")
        return done.stdout

    def phase(*phases: str):
        return lambda obj: (obj.get("status") or {}).get("phase") in phases

    print(f"Demo model: {model}. Every command below runs as printed in a shell set up with:")
    for line in shell_setup(kubeconfig):
        print(f"  {line}")
    sh("kubectl apply -f examples/01-agent.yaml -f examples/02-session.yaml -f examples/03-input.yaml")
    sh("kubectl sessionops watch demo-hello")
    if model == DEFAULT_DEMO_MODEL:
        print(f"\nThe session answers any number of messages. Cue words make {model} use a tool:")
        for cue, what in CUES.items():
            print(f"  {cue:<9} {what}")
        sh('kubectl sessionops send demo "Please check the work directory with a shell command." --watch')
        approved = asyncio.run(stack.get("asess", "demo"))["status"]["activeRun"]
        print("\nThe turn waits for an approval (a waiting turn holds no pod). Approve it:")
        sh("kubectl sessionops approve demo --watch")
        sh("kubectl get asess,ainput,arun")
        print("\nWhat the agent did in that turn, step by step (its transcript, under the run's RBAC):")
        sh(f"kubectl sessionops transcript {approved}")
        print("\nNow a turn cancelled with plain kubectl (spec.cancel: true):")
        sh('kubectl sessionops send demo "One more shell command, please." --watch')
        run = asyncio.run(stack.get("asess", "demo"))["status"]["activeRun"]
        sh(f"""kubectl patch arun {run} --type=merge -p '{{"spec":{{"cancel":true}}}}'""")
        cancelled = asyncio.run(stack.wait_for("arun", run, phase("Cancelled"), timeout=60))
        print(f"cleanup steps: {', '.join(cancelled['status']['cancellation']['completedSteps'])}")
        asyncio.run(stack.wait_for("asess", "demo", phase("Paused"), timeout=30))
        sh("kubectl get asess demo -o wide")
        print("\nThe cancelled turn's transcript: the call that never ran is marked cancelled:")
        sh(f"kubectl sessionops transcript {run}")
        print("\nThe queue stays paused until a Continue input:")
        sh("kubectl sessionops continue demo")
    else:
        sh("kubectl get asess,ainput,arun")
    print("\nTry it yourself: paste these lines into a shell (the session keeps answering):")
    for line in [*shell_setup(kubeconfig), *try_it_commands(model)]:
        print(f"  {line}")
    print("\n`make dev-down` stops the local stack.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.localstack", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down", "demo"])
    args = parser.parse_args(argv)
    if args.command == "up":
        model = demo_model(os.environ)  # a bad setting stops here, before anything starts
        try:
            up(model)
        except BaseException:
            down(quiet=True)
            raise
    elif args.command == "down":
        down()
    else:
        demo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
