"""Cancellation in every phase through the whole stack, including an operator restart."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.e2e.manifests import phase, start_turn

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def cancel(stack, run: str) -> None:
    await stack.kubectl("patch", "arun", run, "--type=merge", "-p", '{"spec":{"cancel":true}}')


async def test_cancel_a_pending_run_whose_job_never_started(local: tuple) -> None:
    stack, cluster = local
    runner = stack.pod_runner
    name = f"p{uuid.uuid4().hex[:6]}"
    # The runner's methods use blocking clients: never call them on the loop that serves the cluster.
    await asyncio.to_thread(runner.hold, f"{name}-t1")
    try:
        await start_turn(stack, name, "replay/hello")
        await stack.wait_for("arun", f"{name}-t1", lambda r: (r.get("status") or {}).get("segments"))
        await cancel(stack, f"{name}-t1")
        run = await stack.wait_for("arun", f"{name}-t1", phase("Cancelled"), timeout=60)
    finally:
        await asyncio.to_thread(runner.unhold, f"{name}-t1")
    assert run["status"]["segments"][-1]["outcome"] == "Cancelled"
    assert (await stack.kubectl("get", "job", f"{name}-t1-1", check=False)).returncode != 0  # deleted
    await stack.wait_for("asess", name, phase("Paused"))


async def test_cancel_a_running_turn_stops_its_job_before_cleaning(local: tuple) -> None:
    stack, _ = local
    name = f"r{uuid.uuid4().hex[:6]}"
    await start_turn(stack, name, "replay/slow")
    await stack.wait_for("arun", f"{name}-t1", phase("Running"), timeout=60)
    await cancel(stack, f"{name}-t1")
    run = await stack.wait_for("arun", f"{name}-t1", phase("Cancelled"), timeout=60)
    assert run["status"]["segments"][-1]["outcome"] == "Cancelled"
    execution = (await asyncio.to_thread(stack.pod_runner.executions_of, f"{name}-t1-1"))[-1]
    assert execution.finished is not None  # the worker was stopped before Cancelled was written
    lease = await stack.get("lease", f"sessionops-{name}")
    assert not lease["spec"].get("holderIdentity")


async def test_an_operator_killed_mid_cancellation_finishes_it_after_restart(local: tuple) -> None:
    stack, _ = local
    name = f"o{uuid.uuid4().hex[:6]}"
    await start_turn(stack, name, "replay/parallel-approval")
    await stack.wait_for("arun", f"{name}-t1", phase("Waiting"), timeout=90)
    # The request needs the webhook (failurePolicy: Fail), so it goes in while the operator runs;
    # the operator is then killed at whatever point of the flow it has reached.
    await cancel(stack, f"{name}-t1")
    await stack.stop_operator(kill=True)
    await stack.start_operator()
    run = await stack.wait_for("arun", f"{name}-t1", phase("Cancelled"), timeout=60)
    assert run["status"]["cancellation"]["completedSteps"] == ["MergeCompletedTasks", "AddCancellationResults",
                                                               "ClearTasks"]


async def test_phase_changes_are_events_and_metrics(local: tuple) -> None:
    import aiohttp

    stack, _ = local
    name = f"e{uuid.uuid4().hex[:6]}"
    await start_turn(stack, name, "replay/hello")
    await stack.wait_for("arun", f"{name}-t1", phase("Succeeded"), timeout=90)
    await asyncio.sleep(1)
    events = await stack.kubectl("get", "events", "--field-selector", f"involvedObject.name={name}-t1",
                                 "-o", "jsonpath={.items[*].reason}")
    assert "Succeeded" in events.stdout.split()
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{stack.metrics_port}/metrics") as r:
        text = await r.text()
    assert 'sessionops_admissions_total{kind="AgentInput",operation="CREATE",outcome="allowed"}' in text
    assert 'sessionops_phase_transitions_total{kind="AgentRun",phase="Succeeded"}' in text
    assert "sessionops_dispatch_latency_seconds_count" in text


async def test_deleting_a_session_deletes_its_thread_and_its_objects(local: tuple) -> None:
    import psycopg

    stack, _ = local
    name = f"d{uuid.uuid4().hex[:6]}"
    await start_turn(stack, name, "replay/hello")
    await stack.wait_for("arun", f"{name}-t1", phase("Succeeded"), timeout=90)
    uid = (await stack.get("asess", name))["metadata"]["uid"]

    def checkpoints() -> int:
        with psycopg.connect(stack.checkpoint_dsn()) as conn:  # the namespace's schema, as the operator
            return conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = %s", (uid,)).fetchone()[0]

    assert await asyncio.to_thread(checkpoints) > 0
    await stack.kubectl("delete", "asess", name, "--timeout=60s")
    assert await asyncio.to_thread(checkpoints) == 0
    for kind, obj in (("arun", f"{name}-t1"), ("ainput", f"{name}-1")):  # garbage-collected with the session
        for _ in range(100):
            if (await stack.kubectl("get", kind, obj, check=False)).returncode != 0:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"{kind}/{obj} outlived its session")


async def test_workers_get_their_namespaces_own_database_role_as_a_file(local: tuple) -> None:
    """The operator provisioned the namespace before its first Job: the Secret it wrote holds the
    namespace role's DSN (never the admin's), the Job mounts it as a file and names only its path,
    and that credential opens this namespace's checkpoints and nothing else."""
    import base64

    import psycopg

    from sessionops.platform import checkpoint_scope

    stack, _ = local
    name = f"c{uuid.uuid4().hex[:6]}"
    await start_turn(stack, name, "replay/hello")
    await stack.wait_for("arun", f"{name}-t1", phase("Succeeded"), timeout=90)
    secret = await stack.get("secret", "sessionops-worker-database", stack.namespace, admin=True)
    assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "sessionops"
    dsn = base64.b64decode(secret["data"]["dsn"]).decode()
    scope = checkpoint_scope.scope_of(stack.namespace, checkpoint_scope.database_of(stack.database_url))
    assert checkpoint_scope.user_of(dsn) == scope.role != checkpoint_scope.user_of(stack.database_url)
    job = await stack.get("job", f"{name}-t1-1", stack.namespace, admin=True)
    pod = job["spec"]["template"]["spec"]
    (worker,) = [c for c in pod["containers"] if c["name"] == "worker"]
    assert not [e for e in worker["env"] if "secretKeyRef" in (e.get("valueFrom") or {})]
    assert {e["name"]: e.get("value") for e in worker["env"]}["SESSIONOPS_DATABASE_URL_FILE"] == \
        "/var/run/secrets/sessionops/database/dsn"
    uid = (await stack.get("asess", name))["metadata"]["uid"]

    def visible() -> tuple[int, list[str]]:
        with psycopg.connect(dsn) as conn:
            own = conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = %s", (uid,)).fetchone()[0]
            schemas = [r[0] for r in conn.execute("SELECT DISTINCT table_schema FROM information_schema.tables "
                                                  "WHERE table_name = 'checkpoints'").fetchall()]
        return own, schemas

    own, schemas = await asyncio.to_thread(visible)
    assert own > 0 and schemas == [scope.schema]
